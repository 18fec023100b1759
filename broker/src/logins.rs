//! What the front-ends' logins ask of the broker: a login is not an
//! operation of a principal (there is none yet), so these are the
//! broker's, not the door's. Over `crate::access`'s stores, in a file of
//! their own so that `access.rs` (which `broker.rs` holds) imports
//! nothing of the broker: no import circle.

use std::sync::Arc;

use tidelog_security::config::SecurityConfig;
use tidelog_security::scram::{Mechanism, ScramCredential, ScramError, ServerFirst};

use crate::broker::Broker;
use crate::principal::Principal;

impl Broker {
    /// The `security:` section.
    pub fn security(&self) -> &SecurityConfig {
        self.access.config()
    }

    /// Starts a SCRAM exchange: reads the client's first message and
    /// answers the server's first. An unknown user gets an answer like a
    /// known one's (a stable fake salt), and fails at the proof.
    pub fn scram_start(
        &self,
        mechanism: Mechanism,
        client_first: &[u8],
    ) -> Result<(ServerFirst, Vec<u8>), ScramError> {
        let users = &self.access.users;
        ServerFirst::start(
            mechanism,
            client_first,
            self.access.config().scram_iterations,
            |user| users.credential(user, mechanism),
        )
    }

    /// The principal of `user` if `password` is theirs (SASL/PLAIN,
    /// HTTP Basic): checked against the stored SCRAM credential, which
    /// costs its PBKDF2 iterations, on the blocking pool, unless the same
    /// password was verified against the same credential lately
    /// (`tidelog_security::verified`: HTTP Basic sends it every request).
    pub async fn login_with_password(
        self: &Arc<Self>,
        user: &str,
        password: Vec<u8>,
    ) -> Option<Principal> {
        if self.access.recently_verified(user, &password) {
            return Some(Principal::user(user));
        }
        let broker = Arc::clone(self);
        let name = user.to_owned();
        let verified =
            crate::blocking::run(move || Ok(broker.access.verify_password(&name, &password)))
                .await
                .unwrap_or(false);
        verified.then(|| Principal::user(user))
    }

    /// Whether `who` may still make requests: a logged-in user must
    /// still exist (every other principal may).
    pub fn account_active(&self, who: &Principal) -> bool {
        match who.user_name() {
            Some(name) => self.access.users.exists(name),
            None => true,
        }
    }

    /// The stored credential of `user` for `mechanism` (tests of the SCRAM
    /// exchange and the user APIs).
    pub fn scram_credential(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential> {
        self.access.users.credential(user, mechanism)
    }
}
