//! Where the cluster is: `clickhouse://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...][/DB][?cluster=NAME]`,
//! or `clickhouses://...[?ca=PEM]` for HTTPS.
//!
//! The port is 8123 and the database `causeway` by default. `https://` or `clickhouses://`
//! mean HTTPS (port 8443) through rustls, checked against Mozilla's roots (`webpki-roots`),
//! or only against the certificates of the PEM file in `?ca=PATH`. Database and cluster
//! names must be identifiers, as they go into SQL unquoted; the password is never printed.
//! Errors name the part of the URL at fault.

use std::fmt;

/// ClickHouse's HTTP port.
pub const DEFAULT_PORT: u16 = 8123;
/// ClickHouse's HTTPS port.
pub const DEFAULT_TLS_PORT: u16 = 8443;
/// The database the tables go in when the URL names none.
pub const DEFAULT_DATABASE: &str = "causeway";

/// A parsed store URL.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The nodes' HTTP interfaces, `host:port`; queries go to the first that answers.
    /// Schema changes go to all of them, so a cluster's URL lists one node per shard.
    pub nodes: Vec<String>,
    /// HTTPS rather than HTTP.
    pub tls: bool,
    /// The database of Causeway's tables.
    pub database: String,
    /// The cluster (`remote_servers`) the tables span; none for a single server.
    pub cluster: Option<String>,
    /// User name (ClickHouse's `default` when none).
    pub user: Option<String>,
    /// Password; never printed.
    pub password: Option<String>,
    /// A PEM file of the certificates to trust for HTTPS instead of the public roots (a
    /// cluster's own authority).
    pub ca: Option<String>,
}

/// Why a store URL was refused, naming the part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("store URL {part}: {reason}")]
pub struct EndpointError {
    /// The part of the URL at fault.
    pub part: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

fn fail(part: &'static str, reason: impl Into<String>) -> EndpointError {
    EndpointError {
        part,
        reason: reason.into(),
    }
}

impl Endpoint {
    /// Reads a store URL. `clickhouse://` and `http://` mean HTTP; `clickhouses://` and
    /// `https://` mean HTTPS.
    pub fn parse(url: &str) -> Result<Endpoint, EndpointError> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| fail("scheme", "expected clickhouse://HOST:PORT/DB"))?;
        let tls = match scheme {
            "clickhouse" | "http" => false,
            "clickhouses" | "https" => true,
            other => {
                return Err(fail(
                    "scheme",
                    format!("{other:?} is not clickhouse, clickhouses, http or https"),
                ))
            }
        };
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match rest.split_once('/') {
            Some((a, p)) => (a, p),
            None => (rest, ""),
        };
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            None => (None, None),
            Some(u) => match u.split_once(':') {
                Some((name, pass)) => {
                    (Some(decode("user", name)?), Some(decode("password", pass)?))
                }
                None => (Some(decode("user", u)?), None),
            },
        };
        let default_port = if tls { DEFAULT_TLS_PORT } else { DEFAULT_PORT };
        let nodes = hosts
            .split(',')
            .map(|h| node(h, default_port))
            .collect::<Result<Vec<_>, _>>()?;
        let database = match path.trim_end_matches('/') {
            "" => DEFAULT_DATABASE.to_string(),
            db => identifier("database", db)?.to_string(),
        };
        let (mut cluster, mut ca) = (None, None);
        if let Some(q) = query {
            let pairs: Vec<(String, String)> =
                serde_urlencoded::from_str(q).map_err(|e| fail("query", format!("{q:?}: {e}")))?;
            for (key, value) in pairs {
                match key.as_str() {
                    "cluster" => cluster = Some(identifier("cluster", &value)?.to_string()),
                    "ca" if !tls => {
                        return Err(fail("ca", "only HTTPS URLs (clickhouses://) take a CA"))
                    }
                    "ca" if value.is_empty() => return Err(fail("ca", "empty (expected a path)")),
                    "ca" => ca = Some(value),
                    other => {
                        return Err(fail(
                            "query",
                            format!("unknown parameter {other:?} (known: cluster, ca)"),
                        ))
                    }
                }
            }
        }
        Ok(Endpoint {
            nodes,
            tls,
            database,
            cluster,
            user,
            password,
            ca,
        })
    }

    /// The base URL of a node's HTTP interface.
    pub fn base_url(&self, node: &str) -> String {
        format!("{}://{node}/", if self.tls { "https" } else { "http" })
    }
}

/// The URL as given, less its password.
impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls {
            "clickhouses"
        } else {
            "clickhouse"
        };
        write!(f, "{scheme}://")?;
        if let Some(user) = &self.user {
            write!(f, "{user}@")?;
        }
        write!(f, "{}/{}", self.nodes.join(","), self.database)?;
        let mut query = Vec::new();
        if let Some(cluster) = &self.cluster {
            query.push(("cluster", cluster.as_str()));
        }
        if let Some(ca) = &self.ca {
            query.push(("ca", ca.as_str()));
        }
        if !query.is_empty() {
            let query = serde_urlencoded::to_string(query).map_err(|_| fmt::Error)?;
            write!(f, "?{query}")?;
        }
        Ok(())
    }
}

fn decode(part: &'static str, text: &str) -> Result<String, EndpointError> {
    // Percent-decoding through the form decoder: a user or password may hold `@` or `:`.
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(&format!("v={}", text.replace('+', "%2B")))
            .map_err(|e| fail(part, e.to_string()))?;
    Ok(pairs.into_iter().next().map(|(_, v)| v).unwrap_or_default())
}

fn node(text: &str, default_port: u16) -> Result<String, EndpointError> {
    if text.is_empty() {
        return Err(fail("host", "empty (expected HOST or HOST:PORT)"));
    }
    let (host, port) = match text.rsplit_once(':') {
        // An IPv6 address in brackets keeps its colons.
        Some((h, p)) if !p.contains(']') => (h, Some(p)),
        _ => (text, None),
    };
    if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_[]:".contains(&b))
    {
        return Err(fail(
            "host",
            format!("{host:?} is not a host name or address"),
        ));
    }
    let port = match port {
        None => default_port,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| fail("port", format!("{p:?} is not a port number")))?,
    };
    Ok(format!("{host}:{port}"))
}

/// Names go into SQL unquoted, so only letters, digits and `_`, not starting with a digit.
fn identifier<'a>(part: &'static str, name: &'a str) -> Result<&'a str, EndpointError> {
    let ok = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(name)
    } else {
        Err(fail(
            part,
            format!("{name:?}: letters, digits and _ only, not starting with a digit"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_url_gives_every_part() {
        let e = Endpoint::parse("clickhouse://ops:s%40cret@a:9123,b/traces?cluster=main").unwrap();
        assert_eq!(e.nodes, vec!["a:9123", "b:8123"]);
        assert!(!e.tls);
        assert_eq!(e.database, "traces");
        assert_eq!(e.cluster.as_deref(), Some("main"));
        assert_eq!(e.user.as_deref(), Some("ops"));
        assert_eq!(e.password.as_deref(), Some("s@cret"));
        assert_eq!(
            e.to_string(),
            "clickhouse://ops@a:9123,b:8123/traces?cluster=main"
        );
        assert!(!format!("{e:?}").contains("cret"));
    }

    #[test]
    fn defaults_and_https() {
        let e = Endpoint::parse("https://127.0.0.1").unwrap();
        assert_eq!(e.nodes, vec!["127.0.0.1:8443"]);
        assert!(e.tls);
        assert_eq!(e.database, DEFAULT_DATABASE);
        assert_eq!(e.cluster, None);
        assert_eq!(e.ca, None);
        assert_eq!(e.base_url(&e.nodes[0]), "https://127.0.0.1:8443/");
        let e = Endpoint::parse("clickhouses://a:9440/t?cluster=c&ca=/etc/ch/ca%20.pem").unwrap();
        assert_eq!(e.ca.as_deref(), Some("/etc/ch/ca .pem"));
        assert_eq!(
            e.to_string(),
            "clickhouses://a:9440/t?cluster=c&ca=%2Fetc%2Fch%2Fca+.pem"
        );
        assert_eq!(Endpoint::parse(&e.to_string()).unwrap(), e);
    }

    #[test]
    fn bad_parts_are_named() {
        let part = |url: &str| Endpoint::parse(url).unwrap_err().part;
        assert_eq!(part("127.0.0.1:8123"), "scheme");
        assert_eq!(part("ftp://a"), "scheme");
        assert_eq!(part("clickhouse://a:x"), "port");
        assert_eq!(part("clickhouse://a:0"), "port");
        assert_eq!(part("clickhouse://a,,b"), "host");
        assert_eq!(part("clickhouse://a/x;drop"), "database");
        assert_eq!(part("clickhouse://a/db?cluster=c'1"), "cluster");
        assert_eq!(part("clickhouse://a/db?shard=1"), "query");
        assert_eq!(part("clickhouse://a/db?ca=ca.pem"), "ca");
        assert_eq!(part("clickhouses://a/db?ca="), "ca");
    }
}
