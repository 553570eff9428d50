//! Open connections per client address, with an upper bound (`max_connections_per_ip`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Counts open connections per client address.
#[derive(Debug)]
pub struct ConnLimiter {
    /// Most connections per address; 0: no limit (nothing is counted).
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One counted connection: dropping it frees its place.
#[derive(Debug)]
pub struct ConnPermit {
    /// `None` when nothing is counted (no limit).
    held: Option<(Arc<ConnLimiter>, IpAddr)>,
}

impl ConnLimiter {
    /// A limiter allowing `max` connections per address (0: unlimited).
    pub fn new(max: usize) -> Arc<ConnLimiter> {
        Arc::new(ConnLimiter {
            max,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A place for a new connection from `ip`, or `None` when it has `max` already.
    /// An IPv4 address mapped into IPv6 counts as the IPv4 address.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Option<ConnPermit> {
        if self.max == 0 {
            return Some(ConnPermit { held: None });
        }
        let ip = ip.to_canonical();
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let n = open.entry(ip).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(ConnPermit {
            held: Some((self.clone(), ip)),
        })
    }

    /// Connections open from `ip` (counted only with a limit).
    pub fn open_from(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&ip.to_canonical()).copied().unwrap_or(0)
    }
}

impl Drop for ConnPermit {
    fn drop(&mut self) {
        if let Some((limiter, ip)) = self.held.take() {
            let mut open = limiter.open.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(n) = open.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    // No entry per address ever seen: the map holds open ones only.
                    open.remove(&ip);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_per_address() {
        let l = ConnLimiter::new(2);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let p1 = l.try_acquire(a).unwrap();
        let _p2 = l.try_acquire(mapped).unwrap();
        assert!(l.try_acquire(a).is_none());
        let _p3 = l.try_acquire(b).unwrap();
        assert_eq!(l.open_from(a), 2);
        drop(p1);
        assert_eq!(l.open_from(a), 1);
        assert!(l.try_acquire(a).is_some());
        let unlimited = ConnLimiter::new(0);
        let many: Vec<_> = (0..100).filter_map(|_| unlimited.try_acquire(a)).collect();
        assert_eq!(many.len(), 100);
    }
}
