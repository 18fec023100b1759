//! The admin token check both front-ends share (HTTP's bearer token,
//! Kafka's SASL/PLAIN password).

/// Whether `given` is the admin token, compared in time that depends on
/// the lengths only, so a client cannot find the token byte by byte from
/// how long refusals take.
pub fn admin_token_matches(given: &[u8], token: &[u8]) -> bool {
    if given.len() != token.len() {
        return false;
    }
    given
        .iter()
        .zip(token)
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_bytes_match() {
        assert!(admin_token_matches(b"abc", b"abc"));
        assert!(!admin_token_matches(b"abc", b"abd"));
        assert!(!admin_token_matches(b"abc", b"abcd"));
        assert!(!admin_token_matches(b"", b"a"));
        assert!(admin_token_matches(b"", b""));
    }
}
