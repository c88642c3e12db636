//! The load generator: shoppers at a steady average rate (Poisson arrivals), mostly
//! browsing, some checking out. It is not traced itself: each request's trace starts at
//! the frontend.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Sends requests to the frontend.
#[derive(Clone)]
pub struct Load {
    frontend: SocketAddr,
    rate: f64,
    client: reqwest::Client,
    counts: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    failed: AtomicU64,
}

/// Requests sent so far, and how many of them failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadCounts {
    /// Requests sent.
    pub sent: u64,
    /// Requests that got an error status or no answer.
    pub failed: u64,
}

const CHECKOUT_SHARE: f64 = 0.25;
const USERS: u32 = 50;

impl Load {
    /// `rate` requests per second on average to the frontend at `frontend`.
    pub fn new(frontend: SocketAddr, rate: f64) -> Result<Load, reqwest::Error> {
        Ok(Load {
            frontend,
            rate: rate.max(0.01),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()?,
            counts: Arc::default(),
        })
    }

    /// The counts so far.
    pub fn counts(&self) -> LoadCounts {
        LoadCounts {
            sent: self.counts.sent.load(Ordering::Relaxed),
            failed: self.counts.failed.load(Ordering::Relaxed),
        }
    }

    /// Sends one request and waits for its answer; true if it succeeded.
    pub async fn request(&self) -> bool {
        let user = fastrand::u32(1..=USERS);
        let request = if fastrand::f64() < CHECKOUT_SHARE {
            self.client
                .post(format!("http://{}/checkout?user={user}", self.frontend))
        } else {
            self.client
                .get(format!("http://{}/home?user={user}", self.frontend))
        };
        self.counts.sent.fetch_add(1, Ordering::Relaxed);
        let ok = matches!(request.send().await, Ok(r) if r.status().is_success());
        if !ok {
            self.counts.failed.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Sends requests until `stop` resolves, then waits for those in flight.
    pub async fn run(&self, stop: impl std::future::Future<Output = ()>) {
        let mut in_flight = tokio::task::JoinSet::new();
        tokio::pin!(stop);
        loop {
            let gap = Duration::from_secs_f64(-(1.0 - fastrand::f64()).ln() / self.rate);
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(gap) => {
                    let load = self.clone();
                    in_flight.spawn(async move { load.request().await });
                }
                Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
            }
        }
        while in_flight.join_next().await.is_some() {}
    }
}
