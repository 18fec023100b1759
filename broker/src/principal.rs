//! Who is asking: the identity every operation of the broker's door
//! ([`crate::Broker`]'s async methods) is called with.
//!
//! Every request reaches the broker as some principal, so that one check
//! below the front-ends can decide what it may do (the ACLs of the
//! security issue, Kafka's `User:<name>` model). Today there is no login,
//! and every caller is [`Principal::Anonymous`]; the variant for a
//! logged-in user comes with authentication.

/// The identity a request is made as.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Principal {
    /// No login: Kafka's `User:ANONYMOUS`, what every caller is until
    /// authentication exists.
    Anonymous,
}

impl Principal {
    /// Kafka's spelling, `User:ANONYMOUS`, for logs and ACLs.
    pub fn kafka_name(&self) -> &'static str {
        match self {
            Principal::Anonymous => "User:ANONYMOUS",
        }
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kafka_name())
    }
}
