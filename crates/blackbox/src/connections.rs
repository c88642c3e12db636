//! What a capture knows that WAP5's traces did not: which messages travelled on the
//! same connection. A server answers on the connection its request came on, so the cause
//! of an answer is that request, or something the server received while handling it: an
//! answer to a call the server made after the request arrived. Other requests the
//! server received meanwhile are not.
//!
//! This serves `Mode::Connections`, the default of `causeway infer` (`Mode::Faithful` is the
//! paper's linking, `Mode::Greedy` the nearest-parent baseline; why the default departs from
//! the paper: `docs/decisions/009-where-wap5-departs-from-the-paper.md`). On top of WAP5's
//! weighing: an answer a server sends on a connection (its end fixed) is caused by the
//! latest request received on that connection or by an answer to a call the server made
//! after that request arrived; a server with a request still unanswered does not send
//! spontaneously (that request is a candidate however long ago it came); and, in two more
//! rounds with the causes found, a cause must lead back through the server's calls to a
//! request still open (and, for an answer, to its own request). In every round each
//! candidate is also weighed by how often its kind of message (node pair) caused the
//! effect's kind (`Follows`: first from each message's latest candidate, then from the
//! causes found; smoothed, as a log prior): a server that already has its answer from a
//! back end does not call it again for that request, the request that just came in does.
//! In the later rounds a call whose answer came back after the request behind a candidate
//! had been answered is unlikely to be that request's, as likely as its kind's calls were
//! (`answered_in_time`: servers wait for most of their calls). Its instances keep an
//! answer in the path of the request it answers. Connection ends are numbered and looked
//! up in sorted vectors.

use foldhash::{HashMap, HashSet};

use crate::numbers::Numbered;
use crate::parallel::join;
use crate::reconcile::Message;
use crate::rows::Indices;

/// Requests looked at, latest first, for one still open.
const OPEN_REQUESTS_SEARCHED: usize = 256;

/// Calls followed back from an answer to the request behind them.
const CALLS_FOLLOWED: usize = 16;

/// One end of a connection: the node, its endpoint, the peer's endpoint (numbered).
type End = (u32, u32, u32);

/// Messages under their connection end, sorted by end and time.
struct ByEnd(Vec<(End, i64, u32)>);

impl ByEnd {
    /// The latest message at `end` at or before `t`.
    fn latest(&self, end: End, t: i64) -> Option<u32> {
        let p = self.0.partition_point(|(e, at, _)| (*e, *at) <= (end, t));
        p.checked_sub(1)
            .map(|k| &self.0[k])
            .filter(|(e, _, _)| *e == end)
            .map(|(_, _, i)| *i)
    }

    /// The first message at `end` at or after `t`: (time, message).
    fn first_from(&self, end: End, t: i64) -> Option<(i64, u32)> {
        let p = self.0.partition_point(|(e, at, _)| (*e, *at) < (end, t));
        self.0
            .get(p)
            .filter(|(e, _, _)| *e == end)
            .map(|(_, at, i)| (*at, *i))
    }
}

pub(crate) struct Connections {
    /// For a message a server sent on a connection, the latest message it received on
    /// that connection before (the request it answers).
    answers: Indices,
    /// For a message a client received on a connection, the latest message it sent on
    /// that connection before (the request it answers).
    asked_by: Indices,
    /// Per node, the requests it received on its fixed ports: (receipt, message), by
    /// time.
    requests: HashMap<u32, Vec<(i64, u32)>>,
    /// For each such request, the first message its receiver sent on that connection
    /// after it (its answer).
    answered_by: Indices,
    /// Whether each message is such a request.
    is_request: Vec<bool>,
    /// For a call a node made (sent from an ephemeral end), its answer: the first
    /// message received on that connection after it, if it answers that call.
    call_answer: Indices,
}

impl Connections {
    pub(crate) fn of(
        messages: &[Message],
        nodes: &Numbered,
        endpoints: &Numbered,
        fixed: &HashSet<(u32, u32)>,
    ) -> Connections {
        // Every receipt and send under its connection end, sorted: millions of small
        // per-connection lists cost more than these.
        let (src, dst) = (&nodes.src, &nodes.dst);
        let ends = |i: usize| (endpoints.src[i], endpoints.dst[i]);
        let mut received: Vec<(End, i64, u32)> = Vec::new();
        let mut sent: Vec<(End, i64, u32)> = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let (s_ep, d_ep) = ends(i);
            if let Some(r) = m.recv_ns.get() {
                received.push(((dst[i], d_ep, s_ep), r, i as u32));
            }
            if let Some(s) = m.send_ns.get() {
                sent.push(((src[i], s_ep, d_ep), s, i as u32));
            }
        }
        join(|| received.sort_unstable(), || sent.sort_unstable());
        let received = ByEnd(received);
        let sent = ByEnd(sent);
        // For each message, the latest message the other way on its connection before it,
        // seen from one end: a server's answer (sent from a fixed endpoint) after its
        // request, or a client's answer (received at an ephemeral one) after its call.
        let latest_before = |at_sender: bool| -> Indices {
            messages
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let (s, d) = ends(i);
                    let (node, own, other, at, table) = if at_sender {
                        (src[i], s, d, m.send_ns.get()?, &received)
                    } else {
                        (dst[i], d, s, m.recv_ns.get()?, &sent)
                    };
                    if fixed.contains(&(node, own)) != at_sender {
                        return None;
                    }
                    table.latest((node, own, other), at)
                })
                .collect()
        };
        let (answers, asked_by) = join(|| latest_before(true), || latest_before(false));
        let mut requests: HashMap<u32, Vec<(i64, u32)>> = HashMap::default();
        let mut is_request = vec![false; messages.len()];
        for (i, m) in messages.iter().enumerate() {
            let Some(r) = m.recv_ns.get() else { continue };
            if !fixed.contains(&(dst[i], endpoints.dst[i])) {
                continue;
            }
            requests.entry(dst[i]).or_default().push((r, i as u32));
            is_request[i] = true;
        }
        let answered_by: Indices = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let r = m.recv_ns.get().filter(|_| is_request[i])?;
                let (s_ep, d_ep) = ends(i);
                sent.first_from((dst[i], d_ep, s_ep), r).map(|(_, a)| a)
            })
            .collect();
        for v in requests.values_mut() {
            v.sort_unstable();
        }
        let call_answer: Indices = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let (s_ep, d_ep) = ends(i);
                if fixed.contains(&(src[i], s_ep)) {
                    return None;
                }
                let (_, answer) = received.first_from((src[i], s_ep, d_ep), m.send_ns.get()?)?;
                (asked_by.get(answer as usize) == Some(i as u32)).then_some(answer)
            })
            .collect();
        Connections {
            answers,
            asked_by,
            requests,
            answered_by,
            is_request,
            call_answer,
        }
    }

    /// Frees what only weighing causes reads (the requests still open, when each was
    /// answered): at scale it is a sixth of linking's tables, and the instances that
    /// follow do not read it. `allows`, `consistent` and `open_request` know nothing
    /// after.
    pub(crate) fn causes_weighed(&mut self) {
        self.requests = HashMap::default();
        self.answered_by = Indices::default();
        self.call_answer = Indices::default();
    }

    /// When request `request` was answered (its server first sent on its connection
    /// after it).
    pub(crate) fn answered_at(&self, messages: &[Message], request: usize) -> Option<i64> {
        let answer = self.answered_by.get(request)?;
        messages[answer as usize].send_ns.get()
    }

    /// Request `request`'s answer: the first message its server sent on its connection
    /// after it.
    pub(crate) fn answered_by(&self, request: usize) -> Option<u32> {
        self.answered_by.get(request)
    }

    /// The requests `node` received on its fixed ports: (receipt, message), by time.
    pub(crate) fn requests_of(&self, node: u32) -> &[(i64, u32)] {
        self.requests.get(&node).map_or(&[], Vec::as_slice)
    }

    /// The nodes that received requests.
    pub(crate) fn servers(&self) -> impl Iterator<Item = u32> + '_ {
        self.requests.keys().copied()
    }

    /// Call `call`'s answer: the first message received on its connection after it, if
    /// it answers that call.
    pub(crate) fn call_answer(&self, call: usize) -> Option<u32> {
        self.call_answer.get(call)
    }

    /// The request whose handling message `j` (received by a server) belongs to, by
    /// `causes`: `j` itself, or for an answer to a call, the request behind the call.
    fn request_behind(&self, causes: &Indices, j: usize) -> Option<usize> {
        let mut x = j;
        for _ in 0..CALLS_FOLLOWED {
            if self.is_request[x] {
                return Some(x);
            }
            let call = self.asked_by.get(x)?;
            x = causes.get(call as usize)? as usize;
        }
        None
    }

    /// The request message `i` was sent for, `cause` (received by its sender) having
    /// caused it: the request `i` answers, if `in_path`; else `cause` if it is a request;
    /// else, `cause` answering a call, the request that call was made for
    /// (`served_by_call(cause)`); else `cause` itself.
    pub(crate) fn request_served(
        &self,
        i: usize,
        cause: u32,
        in_path: impl Fn(u32) -> bool,
        served_by_call: impl Fn(u32) -> Option<u32>,
    ) -> u32 {
        if let Some(r) = self.answers.get(i).filter(|&r| in_path(r)) {
            return r;
        }
        if self.is_request[cause as usize] {
            return cause;
        }
        served_by_call(cause).unwrap_or(cause)
    }

    /// Whether message `i` is a request: received by a server on one of its fixed ports.
    pub(crate) fn is_request(&self, i: usize) -> bool {
        self.is_request.get(i).copied().unwrap_or(false)
    }

    /// For a message a server sent on a connection, the latest message it received on that
    /// connection before (the request it answers).
    pub(crate) fn answers(&self, answer: u32) -> Option<u32> {
        self.answers.get(answer as usize)
    }

    /// For a message a client received, the latest message it sent before on that
    /// connection (the call it answers, on a connection that is not multiplexed).
    pub(crate) fn asked_by(&self, answer: u32) -> Option<u32> {
        self.asked_by.get(answer as usize)
    }

    /// Whether `j` can have caused `i` given the causes found so far: the request behind
    /// `j` was still open when `i` was sent, and when `i` answers a request, it is that
    /// one.
    pub(crate) fn consistent(
        &self,
        messages: &[Message],
        causes: &Indices,
        i: usize,
        j: usize,
    ) -> bool {
        let Some(request) = self.request_behind(causes, j) else {
            return true;
        };
        if let (Some(answered), Some(sent)) = (
            self.answered_at(messages, request),
            messages[i].send_ns.get(),
        ) {
            if answered < sent {
                return false;
            }
        }
        self.answers.get(i).is_none_or(|r| r as usize == request)
    }

    /// Whether call `i`, caused by `j`, had its answer by the time the request behind `j`
    /// was answered, as a server that waits for its calls has; `None` when a time is not
    /// known (`i` is no call, its answer or the request's was not seen).
    pub(crate) fn answered_in_time(
        &self,
        messages: &[Message],
        causes: &Indices,
        i: usize,
        j: usize,
    ) -> Option<bool> {
        let answer = self.call_answer.get(i)?;
        let back = messages[answer as usize].recv_ns.get()?;
        let request = self.request_behind(causes, j)?;
        Some(self.answered_at(messages, request)? >= back)
    }

    /// The latest request `node` received within `window_ns` before `at` and had not
    /// answered by then, among those `eligible`: (message, receipt).
    pub(crate) fn open_request(
        &self,
        messages: &[Message],
        node: u32,
        at: i64,
        window_ns: i64,
        eligible: impl Fn(usize) -> bool,
    ) -> Option<(u32, i64)> {
        let list = self.requests.get(&node)?;
        let end = list.partition_point(|(r, _)| *r <= at);
        list[..end]
            .iter()
            .rev()
            .take_while(|(r, _)| at - r <= window_ns)
            .take(OPEN_REQUESTS_SEARCHED)
            .find(|&&(_, j)| {
                self.answered_at(messages, j as usize)
                    .is_none_or(|a| a >= at)
                    && eligible(j as usize)
            })
            .map(|&(r, j)| (j, r))
    }

    /// Whether message `j`, received by `i`'s sender, can have caused `i`.
    pub(crate) fn allows(&self, messages: &[Message], i: usize, j: usize) -> bool {
        // A request its server had answered before is finished.
        if let (Some(answered), Some(sent)) =
            (self.answered_at(messages, j), messages[i].send_ns.get())
        {
            if answered < sent {
                return false;
            }
        }
        let Some(request) = self.answers.get(i) else {
            return true;
        };
        let request = request as usize;
        if j == request {
            return true;
        }
        // An answer to a call made after the request arrived.
        let (Some(arrived), Some(r)) = (messages[request].recv_ns.get(), messages[j].recv_ns.get())
        else {
            return false;
        };
        r > arrived
            && self
                .asked_by
                .get(j)
                .and_then(|q| messages[q as usize].send_ns.get())
                .is_some_and(|asked| asked >= arrived)
    }
}
