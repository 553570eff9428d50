//! CPU time and memory of processes, from /proc.

/// CPU seconds (user + system, all threads) of a process.
pub fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / clock_ticks()
}

/// The unit of /proc/<pid>/stat times (USER_HZ, 100 on Linux whatever the kernel's HZ).
fn clock_ticks() -> f64 {
    100.0
}

fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Resident set size now, KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// Peak resident set size, KiB.
pub fn hwm_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:")
}

/// Sum of [`cpu_secs`] over processes.
pub fn cpu_sum(pids: &[u32]) -> f64 {
    pids.iter().map(|&p| cpu_secs(p)).sum()
}
