//! One-way messages (queues, timers, callbacks): the sender records a send with a message
//! id and passes a token with the message; the receiver records the receive with the same
//! id, and its work joins the sender's trace (Pip's messages).
//!
//! The token is `<traceparent>;<message id in 16 hex digits>`. A receiving span that is a
//! root joins the sender's trace as its child; a receiving span that already has a parent
//! gets a link to the sender instead.

use causeway_model::{Direction, Message, SpanId, TraceId};

use crate::clock::{new_span_id, now_ns};
use crate::context::{with_record, SpanExt};
use crate::propagation::{parse_traceparent, SpanContext, TraceState};

/// What travels with a message: the sender's context and the message id.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageToken {
    /// The sending span.
    pub context: SpanContext,
    /// Pairs the send with its receive.
    pub message_id: u64,
}

impl MessageToken {
    /// A text form for message headers or properties: `<traceparent>;<16 hex digits>`.
    pub fn encode(&self) -> String {
        format!("{};{:016x}", self.context.traceparent(), self.message_id)
    }

    /// Reads the text form; `None` if it is not one.
    pub fn decode(s: &str) -> Option<MessageToken> {
        let (tp, id) = s.trim().split_once(';')?;
        let (trace_id, span_id, flags): (TraceId, SpanId, u8) = parse_traceparent(tp)?;
        if id.len() != 16 {
            return None;
        }
        let message_id = u64::from_str_radix(id, 16).ok()?;
        Some(MessageToken {
            context: SpanContext {
                trace_id,
                span_id,
                flags,
                trace_state: TraceState::default(),
                remote: true,
            },
            message_id,
        })
    }
}

/// Records that `span` sends a message to `peer` (a queue, a host) of `size` bytes, and
/// returns the token to send with it. `None` when Causeway does not record the span.
pub fn send(span: &tracing::Span, peer: Option<&str>, size: Option<u64>) -> Option<MessageToken> {
    let message_id = new_span_id().get();
    let peer = peer.map(str::to_owned);
    with_record(span, |r| {
        r.add_message(Message {
            direction: Direction::Send,
            id: message_id,
            time: now_ns(),
            peer,
            size,
        });
        MessageToken {
            context: r.context(),
            message_id,
        }
    })
}

/// Records that `span` received the message behind `token`. A span without a parent
/// joins the sender's trace as its child; a span that already has a parent is linked to
/// the sender instead.
pub fn receive(span: &tracing::Span, token: &MessageToken, peer: Option<&str>, size: Option<u64>) {
    let is_root = with_record(span, |r| r.parent_id.is_none()).unwrap_or(false);
    if is_root {
        crate::context::set_remote_parent(span, &token.context);
    } else {
        span.add_link(&token.context, Vec::new());
    }
    let peer = peer.map(str::to_owned);
    with_record(span, |r| {
        r.add_message(Message {
            direction: Direction::Recv,
            id: token.message_id,
            time: now_ns(),
            peer,
            size,
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn tokens_round_trip(t in 1u128.., s in 1u64.., f in 0u8..2, id in any::<u64>()) {
            let tok = MessageToken {
                context: SpanContext {
                    trace_id: TraceId::new(t).unwrap(),
                    span_id: SpanId::new(s).unwrap(),
                    flags: f,
                    trace_state: TraceState::default(),
                    remote: true,
                },
                message_id: id,
            };
            prop_assert_eq!(MessageToken::decode(&tok.encode()), Some(tok));
        }

        #[test]
        fn decoding_junk_never_panics(s in "\\PC{0,90}") {
            let _ = MessageToken::decode(&s);
        }
    }
}
