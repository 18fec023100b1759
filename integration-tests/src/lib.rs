//! Black-box tests live in `tests/`; this library holds what they share
//! beyond the server harness of `tests/common`: the real client libraries
//! ([`clients`]) and the console test's browser ([`browser`]).

pub mod browser;
pub mod clients;
