//! Ground truth for black-box inference from a system that is also instrumented: each
//! message is matched to the server span of the request it carried, by the connection's
//! client endpoint (the span's `network.peer.address` and `network.peer.port`, which the
//! demo records with a layer inside `TraceLayer`) and time. Truth also comes from
//! Dapper-style request parents alone, with [`latest_causes`] adding the causes.
//!
//! A request message belongs to the first call on its connection still running when it
//! arrived (an HTTP/1.1 connection carries one request at a time: the span starts just
//! after the request is read and ends before the response is written); a response to the
//! call on its connection started before it and not answered yet (a server may answer
//! before its span ends), the one ending nearest. On a multiplexed connection (HTTP/2)
//! calls overlap, and matching by time can be wrong.
//!
//! A message's true parent is the request of the call it was sent while handling; its
//! true cause is what WAP5's linking looks for: the latest message its sender received,
//! before sending it, while handling that call. A request is sent while handling its
//! call's caller (the nearest server span above it), a response while handling its own
//! call; a request is received by its call, a response by the caller.

use foldhash::{HashMap, HashSet};

use crate::link::Assignment;
use crate::reconcile::{connection_of, Message, MessageId, MessageIndex};
use crate::score::Truth;

/// One instrumented server call: its trace, the client end of its connection, its time.
#[derive(Clone, Debug)]
pub struct ServerCall {
    /// The trace id of the call's span.
    pub trace: String,
    /// Unique among the calls (the span id).
    pub id: u64,
    /// The call whose handling made this one (the nearest server span above it).
    pub caller: Option<u64>,
    /// The client's `ip:port`, as a message names it.
    pub peer: String,
    /// When the span started, wall-clock ns (as messages' times).
    pub start_ns: i64,
    /// When the span ended, wall-clock ns.
    pub end_ns: i64,
}

/// The calls that a few neighbours in start order away from `at` can be.
const NEIGHBOURS: usize = 3;

/// Each message's true trace, parent and cause; messages no call explains (other
/// traffic, such as span exports) are left out.
pub fn truth(messages: &[Message], calls: &[ServerCall]) -> Vec<Truth> {
    let mut by_peer: HashMap<&str, Vec<&ServerCall>> = HashMap::default();
    for c in calls {
        by_peer.entry(c.peer.as_str()).or_default().push(c);
    }
    for v in by_peer.values_mut() {
        v.sort_by_key(|c| c.start_ns);
    }
    // A request's call: the one started nearest its receipt and still running.
    let request_call = |m: &Message| -> Option<&ServerCall> {
        let (list, t) = (
            by_peer.get(connection_of(&m.src_ep))?,
            m.recv_ns.get().or(m.send_ns.get())?,
        );
        let p = list.partition_point(|c| c.start_ns < t);
        let lo = p.saturating_sub(NEIGHBOURS);
        list[lo..(p + NEIGHBOURS).min(list.len())]
            .iter()
            .filter(|c| c.end_ns >= t)
            .min_by_key(|c| c.start_ns.abs_diff(t))
            .copied()
    };
    let mut calls: Vec<Option<(&ServerCall, bool)>> = messages
        .iter()
        .map(|m| request_call(m).map(|c| (c, true)))
        .collect();
    // Responses, per connection in time order: each to a call started before it and not
    // answered yet, the one ending nearest (a server may answer long before its span
    // ends, as after a quorum; on a multiplexed connection calls overlap); a response in
    // several messages, to the call answered last.
    let mut responses: Vec<(&str, i64, usize)> = messages
        .iter()
        .enumerate()
        .filter(|(i, m)| calls[*i].is_none() && by_peer.contains_key(connection_of(&m.dst_ep)))
        .filter_map(|(i, m)| {
            Some((
                connection_of(&m.dst_ep),
                m.send_ns.get().or(m.recv_ns.get())?,
                i,
            ))
        })
        .collect();
    responses.sort_unstable();
    let mut answered: HashSet<u64> = HashSet::default();
    let mut last_answered: HashMap<&str, &ServerCall> = HashMap::default();
    for (peer, t, i) in responses {
        let Some(list) = by_peer.get(peer) else {
            continue;
        };
        let p = list.partition_point(|c| c.start_ns <= t);
        let recent = &list[p.saturating_sub(NEIGHBOURS)..p];
        let call = recent
            .iter()
            .filter(|c| !answered.contains(&c.id))
            .min_by_key(|c| c.end_ns.abs_diff(t))
            .or_else(|| last_answered.get(peer))
            .or_else(|| recent.iter().min_by_key(|c| c.end_ns.abs_diff(t)))
            .copied();
        if let Some(c) = call {
            answered.insert(c.id);
            last_answered.insert(peer, c);
            calls[i] = Some((c, false));
        }
    }
    // Per handling call, the receipts there by time.
    let mut received: HashMap<u64, Vec<(i64, usize)>> = HashMap::default();
    for (i, m) in messages.iter().enumerate() {
        let Some((call, request)) = calls[i] else {
            continue;
        };
        let handler = if request { Some(call.id) } else { call.caller };
        if let (Some(h), Some(r)) = (handler, m.recv_ns.get()) {
            received.entry(h).or_default().push((r, i));
        }
    }
    // Per connection end (receiver's endpoint, sender's endpoint), the receipts by time.
    let mut on_connection: HashMap<(&str, &str), Vec<(i64, usize)>> = HashMap::default();
    for (i, m) in messages.iter().enumerate() {
        if let Some(r) = m.recv_ns.get() {
            on_connection
                .entry((&*m.dst_ep, &*m.src_ep))
                .or_default()
                .push((r, i));
        }
    }
    for v in received.values_mut().chain(on_connection.values_mut()) {
        v.sort_unstable();
    }
    let latest = |list: Option<&Vec<(i64, usize)>>, s: i64| {
        let list = list?;
        let p = list.partition_point(|(r, _)| *r <= s);
        p.checked_sub(1).map(|k| messages[list[k].1].id.clone())
    };
    // Each call's request: the first message that carried it.
    let mut request_of: HashMap<u64, (i64, usize)> = HashMap::default();
    for (i, m) in messages.iter().enumerate() {
        if let (Some((call, true)), Some(r)) = (calls[i], m.recv_ns.get()) {
            let e = request_of.entry(call.id).or_insert((r, i));
            *e = (*e).min((r, i));
        }
    }
    messages
        .iter()
        .zip(&calls)
        .filter_map(|(m, call)| {
            let (call, request) = (*call)?;
            let handler = if request { call.caller } else { Some(call.id) };
            let cause = m.send_ns.get().and_then(|s| {
                latest(handler.and_then(|h| received.get(&h)), s).or_else(|| {
                    // A response whose request came in one message with another call's
                    // (two requests written at once on a multiplexed connection) was
                    // caused by that message.
                    (!request)
                        .then(|| latest(on_connection.get(&(&*m.src_ep, &*m.dst_ep)), s))
                        .flatten()
                })
            });
            // The request it was sent for: its handler's (a request whose message another
            // call's took, as above, has none: its cause stands in).
            let parent = handler
                .and_then(|h| request_of.get(&h))
                .map(|&(_, r)| messages[r].id.clone())
                .or_else(|| cause.clone());
            Some(Truth {
                id: m.id.clone(),
                trace: serde_json::Value::String(call.trace.clone()),
                parent,
                cause,
            })
        })
        .collect()
}

/// Ground truth whose parents name the request a message serves (a request's parent is
/// the request its caller was handling, a response's is its request, as Dapper-style
/// traces give them), with WAP5's causes added: the latest message the sender received,
/// before sending, while handling that request (the request itself, or an answer to a
/// call it made for it).
pub fn latest_causes(messages: &[Message], truth: &[Truth]) -> Vec<Truth> {
    let index = MessageIndex::of(messages);
    let parent: HashMap<&MessageId, &MessageId> = truth
        .iter()
        .filter_map(|t| Some((&t.id, t.parent.as_ref()?)))
        .collect();
    let is_response = |id: &MessageId| -> bool {
        let (Some(m), Some(p)) = (index.get(id), parent.get(id).and_then(|p| index.get(p))) else {
            return false;
        };
        messages[p].src_ep == messages[m].dst_ep && messages[p].dst_ep == messages[m].src_ep
    };
    // Per request, what its handler received for it: the request, and answers to the
    // calls it made.
    let mut handled: HashMap<&MessageId, Vec<(i64, &MessageId)>> = HashMap::default();
    for t in truth {
        let Some(i) = index.get(&t.id) else { continue };
        let Some(r) = messages[i].recv_ns.get() else {
            continue;
        };
        if is_response(&t.id) {
            // An answer belongs to the request its call was made for.
            let call = parent.get(&t.id);
            if let Some(served) = call.and_then(|c| parent.get(c)) {
                handled.entry(served).or_default().push((r, &t.id));
            }
        } else {
            handled.entry(&t.id).or_default().push((r, &t.id));
        }
    }
    for v in handled.values_mut() {
        v.sort_by_key(|(r, _)| *r);
    }
    truth
        .iter()
        .map(|t| {
            let cause = (|| {
                let sent = messages[index.get(&t.id)?].send_ns.get()?;
                let list = handled.get(t.parent.as_ref()?)?;
                let p = list.partition_point(|(r, _)| *r <= sent);
                p.checked_sub(1).map(|k| list[k].1.clone())
            })();
            Truth {
                id: t.id.clone(),
                trace: t.trace.clone(),
                parent: t.parent.clone(),
                cause,
            }
        })
        .collect()
}

/// Truth as assignments (probability 1), to find its patterns and delays.
pub fn assignments(truth: &[Truth]) -> Vec<Assignment> {
    let mut numbers: HashMap<String, u64> = HashMap::default();
    truth
        .iter()
        .map(|t| {
            let next = numbers.len() as u64;
            let trace = *numbers.entry(t.trace.to_string()).or_insert(next);
            Assignment {
                id: t.id.clone(),
                trace,
                parent: t.parent.clone(),
                cause: t.cause.clone(),
                probability: 1.0,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: i64, src: (&str, &str), dst: (&str, &str), send: i64, recv: i64) -> Message {
        Message {
            id: MessageId::Int(id),
            src: src.0.into(),
            src_ep: src.1.into(),
            dst: dst.0.into(),
            dst_ep: dst.1.into(),
            send_ns: Some(send).into(),
            recv_ns: Some(recv).into(),
            bytes: 100,
        }
    }

    fn call(trace: &str, peer: &str, start: i64, end: i64) -> ServerCall {
        ServerCall {
            trace: trace.into(),
            id: start as u64,
            caller: None,
            peer: peer.into(),
            start_ns: start,
            end_ns: end,
        }
    }

    /// Two requests in turn on one keep-alive connection, and their answers; the calls
    /// (spans) start just after each request is read and end at `ends`.
    fn two_calls_in_turn(ends: [i64; 2]) -> (Vec<Message>, Vec<ServerCall>) {
        let c = ("client", "10.0.0.1:5000");
        let s = ("server", "10.0.0.2:80");
        let messages = vec![
            msg(1, c, s, 100, 110),
            msg(2, s, c, 200, 210),
            msg(3, c, s, 300, 310),
            msg(4, s, c, 400, 410),
        ];
        let calls = vec![call("a", c.1, 115, ends[0]), call("b", c.1, 315, ends[1])];
        (messages, calls)
    }

    #[test]
    fn requests_and_responses_on_one_connection_go_to_their_calls() {
        // The spans end before the responses are written.
        let (mut messages, calls) = two_calls_in_turn([195, 395]);
        // Other traffic: no call explains it.
        let c = ("client", "10.0.0.1:5000");
        messages.push(msg(5, c, ("collector", "10.0.0.9:4318"), 500, 510));
        let t = truth(&messages, &calls);
        let got: Vec<(i64, String, Option<i64>)> = t
            .iter()
            .map(|t| {
                let id = |m: &MessageId| match m {
                    MessageId::Int(i) => *i,
                    MessageId::Text(_) => -1,
                };
                (
                    id(&t.id),
                    t.trace.as_str().unwrap_or_default().to_string(),
                    t.parent.as_ref().map(id),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (1, "a".into(), None),
                (2, "a".into(), Some(1)),
                (3, "b".into(), None),
                (4, "b".into(), Some(3)),
            ]
        );
    }

    #[test]
    fn a_server_that_answers_before_its_span_ends_gets_each_response_right() {
        // The server answers each at once and goes on working (as after a quorum
        // write), so both spans are running at the second response, and the first ends
        // nearer it.
        let (messages, calls) = two_calls_in_turn([1000, 1200]);
        let t = truth(&messages, &calls);
        let traces: Vec<&str> = t
            .iter()
            .map(|t| t.trace.as_str().unwrap_or_default())
            .collect();
        assert_eq!(traces, ["a", "a", "b", "b"]);
    }

    #[test]
    fn a_span_clock_slightly_behind_still_finds_the_call() {
        let c = ("client", "10.0.0.1:5000");
        let s = ("server", "10.0.0.2:80");
        let messages = vec![msg(1, c, s, 100, 110), msg(2, s, c, 200, 210)];
        // The span's clock reads 20 ns behind the capture's: it "starts" before the
        // request was read.
        let calls = vec![call("x", c.1, 0, 30), call("a", c.1, 90, 180)];
        let t = truth(&messages, &calls);
        assert!(t.iter().all(|t| t.trace == "a"), "{t:?}");
    }

    #[test]
    fn a_nested_call_is_caused_by_what_its_sender_received_last_in_that_call() {
        let a = ("a", "10.0.0.1:5000");
        let b = ("b", "10.0.0.2:80");
        let b_out = ("b", "10.0.0.2:6000");
        let c = ("c", "10.0.0.3:80");
        let other = ("a", "10.0.0.1:5001");
        let messages = vec![
            msg(1, a, b, 0, 10),
            msg(2, b_out, c, 20, 30),
            // Another request of the same trace reaches b meanwhile (a parallel call):
            // not the cause of what b sends for the first.
            msg(5, other, b, 35, 45),
            msg(3, c, b_out, 40, 50),
            msg(4, b, a, 60, 70),
            msg(6, b, other, 80, 90),
        ];
        let mut first = call("t", a.1, 12, 58);
        first.id = 1;
        let mut nested = call("t", b_out.1, 32, 38);
        nested.caller = Some(1);
        let mut parallel = call("t", other.1, 46, 78);
        parallel.id = 2;
        let t = truth(&messages, &[first, nested, parallel]);
        let causes: Vec<(MessageId, Option<MessageId>)> =
            t.iter().map(|t| (t.id.clone(), t.cause.clone())).collect();
        let id = MessageId::Int;
        assert_eq!(
            causes,
            vec![
                (id(1), None),
                (id(2), Some(id(1))),
                (id(5), None),
                (id(3), Some(id(2))),
                (id(4), Some(id(3))),
                (id(6), Some(id(5))),
            ]
        );
        // Parents are the requests messages were sent for: b's answer to a is for 1.
        let parents: Vec<Option<MessageId>> = t.iter().map(|t| t.parent.clone()).collect();
        let some = |i| Some(id(i));
        assert_eq!(parents, [None, some(1), None, some(2), some(1), some(5)]);
    }

    #[test]
    fn a_response_whose_request_shared_a_message_with_another_is_caused_by_it() {
        // Two calls on one multiplexed connection, both requests in one message (the
        // first call's), then a response each.
        let c = ("client", "10.0.0.1:5000");
        let s = ("server", "10.0.0.2:80");
        let messages = vec![
            msg(1, c, s, 100, 110),
            msg(2, s, c, 200, 210),
            msg(3, s, c, 300, 310),
        ];
        let mut a = call("t", c.1, 112, 195);
        a.id = 1;
        let mut b = call("t", c.1, 150, 295);
        b.id = 2;
        let t = truth(&messages, &[a, b]);
        let parents: Vec<(MessageId, Option<MessageId>)> =
            t.iter().map(|t| (t.id.clone(), t.parent.clone())).collect();
        let id = MessageId::Int;
        assert_eq!(
            parents,
            vec![(id(1), None), (id(2), Some(id(1))), (id(3), Some(id(1)))]
        );
        let causes: Vec<Option<MessageId>> = t.iter().map(|t| t.cause.clone()).collect();
        assert_eq!(causes, [None, Some(id(1)), Some(id(1))]);
    }

    #[test]
    fn request_parents_become_the_latest_message_received_for_the_request() {
        let a = ("a", "10.0.0.1:5000");
        let b = ("b", "10.0.0.2:80");
        let b_out = ("b", "10.0.0.2:6000");
        let c = ("c", "10.0.0.3:80");
        let messages = vec![
            msg(1, a, b, 0, 10),
            msg(2, b_out, c, 20, 30),
            msg(3, c, b_out, 40, 50),
            msg(4, b_out, c, 60, 70),
            msg(5, c, b_out, 80, 90),
            msg(6, b, a, 100, 110),
        ];
        let t = |id: i64, parent: Option<i64>| Truth {
            id: MessageId::Int(id),
            trace: serde_json::json!("t"),
            parent: parent.map(MessageId::Int),
            cause: None,
        };
        // Dapper-style: the calls and the answer to a all name request 1; each answer
        // from c names its call.
        let given = vec![
            t(1, None),
            t(2, Some(1)),
            t(3, Some(2)),
            t(4, Some(1)),
            t(5, Some(4)),
            t(6, Some(1)),
        ];
        let found = latest_causes(&messages, &given);
        let got: Vec<Option<MessageId>> = found.iter().map(|t| t.cause.clone()).collect();
        assert!(found.iter().zip(&given).all(|(f, g)| f.parent == g.parent));
        let id = |i| Some(MessageId::Int(i));
        // The second call follows the first's answer; a's answer follows the second's.
        assert_eq!(got, vec![None, id(1), id(2), id(3), id(4), id(5)]);
    }
}
