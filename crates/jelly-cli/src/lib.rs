//! Library side of the `jelly` command line: each module is one verb or tool, so the
//! binary stays thin and tests can call the same code.

pub mod conformance;
