//! The `grpc-timeout` request header: the client's deadline for the whole call. The
//! server ends a call that outlives it with `DEADLINE_EXCEEDED` (a subscription, or a
//! publish that has not finished: what it appended before stays), as gRPC servers do,
//! so a client that does not cancel on its own deadline does not hold a call forever.

use std::time::Duration;

use axum::http::HeaderMap;
use tonic::Status;

/// The request header (gRPC over HTTP/2: `TimeoutValue TimeoutUnit`).
pub const TIMEOUT_HEADER: &str = "grpc-timeout";

/// The call's timeout from `grpc-timeout`: `None` without the header. The value is at
/// most 8 digits followed by a unit: `H`ours, `M`inutes, `S`econds, `m`illiseconds,
/// `u` (micro) or `n` (nanoseconds).
///
/// ```
/// use axum::http::HeaderMap;
/// use jelly_server::grpc::deadline::timeout;
/// use std::time::Duration;
/// let mut h = HeaderMap::new();
/// h.insert("grpc-timeout", "250m".parse().unwrap());
/// assert_eq!(timeout(&h).unwrap(), Some(Duration::from_millis(250)));
/// ```
pub fn timeout(headers: &HeaderMap) -> Result<Option<Duration>, Status> {
    let Some(v) = headers.get(TIMEOUT_HEADER) else {
        return Ok(None);
    };
    let bad = || {
        Status::invalid_argument(format!(
            "{TIMEOUT_HEADER}: `{}` is not up to 8 digits and a unit (H, M, S, m, u, n)",
            String::from_utf8_lossy(v.as_bytes())
        ))
    };
    let s = v.to_str().map_err(|_| bad())?;
    if s.len() < 2 || s.len() > 9 {
        return Err(bad());
    }
    let (digits, unit) = s.split_at(s.len() - 1);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    Ok(Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return Err(bad()),
    }))
}

/// The status of a call that outlived its `grpc-timeout`.
pub fn exceeded(timeout: Duration) -> Status {
    Status::deadline_exceeded(format!(
        "the call's {TIMEOUT_HEADER} of {} ms passed",
        timeout.as_millis()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &str) -> Result<Option<Duration>, Status> {
        let mut h = HeaderMap::new();
        h.insert(TIMEOUT_HEADER, v.parse().unwrap());
        timeout(&h)
    }

    #[test]
    fn every_unit_and_the_limits_of_the_value() {
        assert_eq!(parse("2H").unwrap(), Some(Duration::from_secs(7200)));
        assert_eq!(parse("3M").unwrap(), Some(Duration::from_secs(180)));
        assert_eq!(parse("1S").unwrap(), Some(Duration::from_secs(1)));
        assert_eq!(
            parse("99999999u").unwrap(),
            Some(Duration::from_micros(99_999_999))
        );
        assert_eq!(parse("5n").unwrap(), Some(Duration::from_nanos(5)));
        assert_eq!(timeout(&HeaderMap::new()).unwrap(), None);
        for bad in ["", "m", "123456789m", "10x", "-1S", "+1S", "1.5S", "S1"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
