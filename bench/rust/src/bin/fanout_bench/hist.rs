//! A log-linear histogram of delays in microseconds: exact below 128 µs, then 64
//! buckets per power of two (under 1.6% relative error), so a few KiB hold any delay up
//! to hours, and histograms of several processes merge by adding counts.

/// Significant bits kept above the exact range.
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this are their own bucket.
const EXACT: u64 = 2 * SUB;
/// Buckets for values up to 2^42 µs (about 50 days).
const BUCKETS: usize = EXACT as usize + (42 - SUB_BITS as usize) * SUB as usize;

/// Counts of values per bucket.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    sum: u128,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            sum: 0,
            max: 0,
        }
    }
}

fn index(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    let idx = EXACT + u64::from(shift - 1) * SUB + ((v >> shift) - SUB);
    (idx as usize).min(BUCKETS - 1)
}

/// The middle of a bucket's range.
fn value_of(i: usize) -> u64 {
    let i = i as u64;
    if i < EXACT {
        return i;
    }
    let shift = (i - EXACT) / SUB + 1;
    let mantissa = (i - EXACT) % SUB + SUB;
    (mantissa << shift) + (1 << shift) / 2
}

impl Histogram {
    /// Records one value (µs).
    pub fn record(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.total += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            return f64::NAN;
        }
        self.sum as f64 / self.total as f64
    }

    /// The value at quantile `q` (0..=1), or NaN when empty.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.total == 0 {
            return f64::NAN;
        }
        let rank = ((self.total as f64 * q).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return (value_of(i).min(self.max)) as f64;
            }
        }
        self.max as f64
    }

    /// Sparse JSON form: `{"n":…,"sum":…,"max":…,"b":[[index,count],…]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let b: Vec<[u64; 2]> = self
            .counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, c)| [i as u64, *c])
            .collect();
        serde_json::json!({ "n": self.total, "sum": self.sum as f64, "max": self.max, "b": b })
    }

    /// Parses [`Histogram::to_json`]'s form.
    pub fn from_json(v: &serde_json::Value) -> Result<Histogram, String> {
        let mut h = Histogram::default();
        let b = v["b"].as_array().ok_or("histogram without buckets")?;
        for pair in b {
            let i = pair[0].as_u64().ok_or("bad bucket index")? as usize;
            let c = pair[1].as_u64().ok_or("bad bucket count")?;
            *h.counts.get_mut(i).ok_or("bucket index out of range")? += c;
        }
        h.total = v["n"].as_u64().ok_or("histogram without n")?;
        h.sum = v["sum"].as_f64().unwrap_or(0.0) as u128;
        h.max = v["max"].as_u64().unwrap_or(0);
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_close() {
        let mut last = 0;
        for v in (0..1_000_000u64).step_by(7).chain([1 << 30, 1 << 40]) {
            let i = index(v);
            assert!(i >= last, "index not monotonic at {v}");
            last = i;
            let back = value_of(i);
            let err = (back as f64 - v as f64).abs() / (v.max(1) as f64);
            assert!(err < 0.02, "{v} -> bucket {i} -> {back}");
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram::default();
        for v in 1..=1000 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5);
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.02, "{p50}");
        let p99 = h.quantile(0.99);
        assert!((p99 - 990_000.0).abs() / 990_000.0 < 0.02, "{p99}");
        let j = h.to_json();
        let h2 = Histogram::from_json(&j).unwrap();
        assert_eq!(h2.count(), 1000);
        assert_eq!(h2.quantile(0.5), p50);
    }
}
