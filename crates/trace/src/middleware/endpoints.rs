//! The two ends of an RPC's connection, recorded on its spans under OpenTelemetry's names
//! (`server.address`/`server.port`, `client.address`/`client.port`, `network.peer.*`,
//! `network.local.*`). With them a socket capture of the same process can tell which
//! captured request an instrumented span served, so inferred and instrumented parts of a
//! request join into one trace.
//!
//! A server learns its connection from the request's extensions: [`Endpoints`] (put there
//! by axum's `into_make_service_with_connect_info::<Endpoints>()` with feature `axum`, or
//! by any server loop that inserts it), axum's `ConnectInfo<SocketAddr>` (the peer only),
//! or tonic's `TcpConnectInfo` (feature `tonic-server`).

use std::net::SocketAddr;

/// The local and remote socket addresses of a server's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    /// The server's own address (the listening socket's).
    pub local: SocketAddr,
    /// The client's address as the server sees it.
    pub peer: SocketAddr,
}

#[cfg(feature = "axum")]
impl
    axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>>
    for Endpoints
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> Endpoints {
        let peer = *stream.remote_addr();
        // A socket that cannot say its own address is gone already; its peer still names it.
        let local = stream.io().local_addr().unwrap_or(peer);
        Endpoints { local, peer }
    }
}

/// What the request's extensions say of its connection: (local, peer), each if known.
#[cfg(feature = "tower")]
fn connection<B>(req: &http::Request<B>) -> (Option<SocketAddr>, Option<SocketAddr>) {
    let ext = req.extensions();
    if let Some(e) = ext.get::<Endpoints>() {
        return (Some(e.local), Some(e.peer));
    }
    #[cfg(feature = "axum")]
    {
        use axum::extract::ConnectInfo;
        if let Some(ConnectInfo(e)) = ext.get::<ConnectInfo<Endpoints>>() {
            return (Some(e.local), Some(e.peer));
        }
        if let Some(ConnectInfo(peer)) = ext.get::<ConnectInfo<SocketAddr>>() {
            return (None, Some(*peer));
        }
    }
    #[cfg(feature = "tonic-server")]
    if let Some(c) = ext.get::<tonic::transport::server::TcpConnectInfo>() {
        return (c.local_addr(), c.remote_addr());
    }
    (None, None)
}

/// Host and port of an authority such as `example.com:8080`, `user@host` or `[::1]:443`
/// (the host without brackets, as OpenTelemetry writes it); the port is `default` when the
/// authority names none.
fn host_port(authority: &str, default: Option<u16>) -> (&str, Option<u16>) {
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p))
            if !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (!h.contains(':') || h.ends_with(']')) =>
        {
            (h, p.parse().ok())
        }
        _ => (authority, None),
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    (host, port.or(default))
}

/// The port a URI's scheme implies.
fn scheme_port(scheme: Option<&str>) -> Option<u16> {
    match scheme {
        Some("http") | Some("ws") => Some(80),
        Some("https") | Some("wss") => Some(443),
        _ => None,
    }
}

/// On a server span: where the client asked to go (the `Host` header, else the URI's
/// authority, else the local socket), who asked, and both sockets.
#[cfg(feature = "tower")]
pub(crate) fn record_server<B>(span: &tracing::Span, req: &http::Request<B>) {
    let (local, peer) = connection(req);
    let authority = req
        .headers()
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()));
    match authority {
        Some(a) => {
            let (host, port) = host_port(a, local.map(|l| l.port()));
            span.record("server.address", host);
            if let Some(port) = port {
                span.record("server.port", port);
            }
        }
        None => {
            if let Some(l) = local {
                span.record("server.address", tracing::field::display(l.ip()));
                span.record("server.port", l.port());
            }
        }
    }
    if let Some(p) = peer {
        span.record("client.address", tracing::field::display(p.ip()));
        span.record("client.port", p.port());
        span.record("network.peer.address", tracing::field::display(p.ip()));
        span.record("network.peer.port", p.port());
    }
    if let Some(l) = local {
        span.record("network.local.address", tracing::field::display(l.ip()));
        span.record("network.local.port", l.port());
    }
}

/// On a client span: the server it calls, from the URI, else `server` (the port the URI's
/// scheme implies when neither names one).
pub(crate) fn record_client(
    span: &tracing::Span,
    uri: &http::Uri,
    server: Option<&http::uri::Authority>,
) {
    if let Some(a) = uri.authority().or(server) {
        let (host, port) = host_port(a.as_str(), scheme_port(uri.scheme_str()));
        span.record("server.address", host);
        if let Some(port) = port {
            span.record("server.port", port);
        }
    }
}

/// On a client span: the socket the answer came from, when the client knows it.
#[cfg(feature = "reqwest")]
pub(crate) fn record_peer(span: &tracing::Span, peer: SocketAddr) {
    span.record("network.peer.address", tracing::field::display(peer.ip()));
    span.record("network.peer.port", peer.port());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_split_into_host_and_port() {
        assert_eq!(
            host_port("example.com:8080", None),
            ("example.com", Some(8080))
        );
        assert_eq!(
            host_port("example.com", Some(80)),
            ("example.com", Some(80))
        );
        assert_eq!(host_port("[::1]:443", None), ("::1", Some(443)));
        assert_eq!(host_port("[::1]", Some(80)), ("::1", Some(80)));
        assert_eq!(host_port("user:pw@db:5432", None), ("db", Some(5432)));
        assert_eq!(host_port("127.0.0.1", None), ("127.0.0.1", None));
        assert_eq!(host_port("host:99999", Some(1)), ("host", Some(1)));
        assert_eq!(host_port("bad host:x", Some(1)), ("bad host:x", Some(1)));
        assert_eq!(scheme_port(Some("https")), Some(443));
        assert_eq!(scheme_port(Some("grpc")), None);
    }
}
