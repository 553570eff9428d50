//! The publisher: one POST per item at a fixed rate, on its own thread, each item
//! carrying `X-Jelly-Header-Seq` (its sequence number, from 0) and
//! `X-Jelly-Header-Sent` (unix µs when the request is sent), which the server hands
//! to subscribers as the metadata `h:seq` and `h:sent`. Arrivals are evenly spaced or,
//! as in Ztreamy's experiments, a Poisson process (exponential gaps, fixed seed).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::hist::Histogram;
use crate::unix_us;

/// What the publisher did.
pub struct PublishStats {
    pub published: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// Time of each POST until its answer, µs.
    pub post_us: Histogram,
    /// Items sent later than their scheduled time by more than one interval.
    pub late: u64,
}

/// How send times are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    /// Every 1/rate seconds.
    Fixed,
    /// Exponentially distributed gaps of mean 1/rate (seeded, so runs repeat).
    Poisson,
}

impl Arrivals {
    pub fn parse(s: &str) -> Option<Arrivals> {
        match s {
            "fixed" => Some(Arrivals::Fixed),
            "poisson" => Some(Arrivals::Poisson),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Arrivals::Fixed => "fixed",
            Arrivals::Poisson => "poisson",
        }
    }
}

/// Gaps between sends, in seconds.
struct Gaps {
    arrivals: Arrivals,
    mean: f64,
    /// xorshift64* state.
    state: u64,
}

impl Gaps {
    fn next(&mut self) -> f64 {
        match self.arrivals {
            Arrivals::Fixed => self.mean,
            Arrivals::Poisson => {
                self.state ^= self.state >> 12;
                self.state ^= self.state << 25;
                self.state ^= self.state >> 27;
                let r = self.state.wrapping_mul(0x2545_f491_4f6c_dd1d);
                // Uniform in (0, 1]: never ln(0).
                let u = ((r >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
                -u.ln() * self.mean
            }
        }
    }
}

/// A running publisher.
pub struct Publisher {
    /// The sequence number of the next item to send.
    pub next_seq: Arc<AtomicU64>,
    /// The last sequence number to send (`u64::MAX`: until told).
    pub last_seq: Arc<AtomicU64>,
    thread: JoinHandle<PublishStats>,
}

impl Publisher {
    /// Starts publishing `bodies` (cycled) to `url/topics/topic/items`, `rate` per second.
    pub fn start(
        url: String,
        topic: String,
        bodies: Vec<Vec<u8>>,
        rate: f64,
        arrivals: Arrivals,
    ) -> Publisher {
        let next_seq = Arc::new(AtomicU64::new(0));
        let last_seq = Arc::new(AtomicU64::new(u64::MAX));
        let (next, last) = (next_seq.clone(), last_seq.clone());
        let thread = std::thread::spawn(move || {
            let mut st = PublishStats {
                published: 0,
                errors: 0,
                first_error: None,
                post_us: Histogram::default(),
                late: 0,
            };
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    st.first_error = Some(e.to_string());
                    return st;
                }
            };
            rt.block_on(async {
                jelly_server::tls::install_crypto_provider();
                let client = reqwest::Client::new();
                let items_url = format!("{url}/topics/{topic}/items");
                let interval = Duration::from_secs_f64(1.0 / rate);
                let mut gaps = Gaps {
                    arrivals,
                    mean: 1.0 / rate,
                    state: 0x9e37_79b9_7f4a_7c15,
                };
                let mut due = Instant::now();
                let mut seq = 0u64;
                while seq <= last.load(Ordering::Relaxed) {
                    due += Duration::from_secs_f64(gaps.next());
                    let now = Instant::now();
                    if now < due {
                        tokio::time::sleep_until(due.into()).await;
                        // The window's end may have been set while sleeping.
                        if seq > last.load(Ordering::Relaxed) {
                            break;
                        }
                    } else if now - due > interval {
                        st.late += 1;
                    }
                    let body = bodies[(seq as usize) % bodies.len()].clone();
                    let sent = Instant::now();
                    let r = client
                        .post(&items_url)
                        .header("content-type", "application/x-jelly-rdf")
                        .header("x-jelly-header-seq", seq.to_string())
                        .header("x-jelly-header-sent", unix_us().to_string())
                        .body(body)
                        .send()
                        .await;
                    match r {
                        Ok(r) if r.status().is_success() => st.published += 1,
                        Ok(r) => {
                            st.errors += 1;
                            st.first_error
                                .get_or_insert_with(|| format!("POST: {}", r.status()));
                        }
                        Err(e) => {
                            st.errors += 1;
                            st.first_error.get_or_insert_with(|| format!("POST: {e}"));
                        }
                    }
                    st.post_us.record(sent.elapsed().as_micros() as u64);
                    seq += 1;
                    next.store(seq, Ordering::Relaxed);
                }
            });
            st
        });
        Publisher {
            next_seq,
            last_seq,
            thread,
        }
    }

    /// Waits for the publisher to send its last item.
    pub fn finish(self) -> Result<PublishStats, String> {
        self.thread
            .join()
            .map_err(|_| "the publisher thread panicked".to_string())
    }
}
