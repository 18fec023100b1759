//! Black-box tests live in `tests/`; this library holds what they share
//! beyond the server harness of `tests/common`: the real client libraries
//! ([`clients`]), the console test's browser ([`browser`]) and the tiered
//! storage tests' S3 server ([`s3`]).

pub mod browser;
pub mod clients;
pub mod s3;
