//! What the benchmark binaries of `jelly-bench` share: reading input files, interned
//! input, running a `jelly serve` process, and reading a process's CPU time and memory
//! from /proc.

pub mod encode_loop;
pub mod input;
pub mod interned;
pub mod procstat;
pub mod serve_proc;
