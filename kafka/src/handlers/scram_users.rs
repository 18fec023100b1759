//! DescribeUserScramCredentials (50) and AlterUserScramCredentials (51),
//! as Kafka serves them (KIP-554): the broker's user store behind the
//! door, which checks DESCRIBE (describe) or ALTER (alter) on the
//! cluster.
//!
//! Invariants:
//! * A describe names no key or salt: each user's mechanisms and their
//!   iterations. Users asked for by name and absent answer
//!   RESOURCE_NOT_FOUND each; a name asked twice, DUPLICATE_RESOURCE.
//! * An alter sends the salt and the salted password, never the
//!   password (the client derives it). A user's changes apply together or
//!   not at all: one change that is malformed (an unknown mechanism:
//!   UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..=16384, an
//!   empty salt or a salted password of the wrong length:
//!   UNACCEPTABLE_CREDENTIAL) refuses that user whole, the others apply.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::security::scram::{Mechanism, ScramCredential};
use tidelog_broker::security::users::{AlterRefusal, Alteration};

use super::NOT_READY;
use crate::context::Context;
use crate::error::broker_code;

fn result(user: &str, code: i16, message: Option<String>) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.to_owned()))
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string))
}

pub fn describe(
    ctx: &Context,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let answer = DescribeUserScramCredentialsResponse::default();
    let Some(door) = ctx.door() else {
        return answer.with_error_code(NOT_READY);
    };
    let users = match door.list_users() {
        Ok(users) => users,
        Err(e) => {
            return answer
                .with_error_code(broker_code(&e))
                .with_error_message(Some(StrBytes::from_string(e.to_string())))
        }
    };
    let infos = |mechanisms: &[(Mechanism, u32)]| {
        mechanisms
            .iter()
            .map(|(m, iterations)| {
                CredentialInfo::default()
                    .with_mechanism(m.code())
                    .with_iterations(i32::try_from(*iterations).unwrap_or(i32::MAX))
            })
            .collect::<Vec<_>>()
    };
    let results = match request.users {
        // Null or empty: every user.
        None => users
            .iter()
            .map(|(name, m)| result(name, 0, None).with_credential_infos(infos(m)))
            .collect(),
        Some(asked) if asked.is_empty() => users
            .iter()
            .map(|(name, m)| result(name, 0, None).with_credential_infos(infos(m)))
            .collect(),
        Some(asked) => {
            let by_name: BTreeMap<&str, &Vec<(Mechanism, u32)>> =
                users.iter().map(|(n, m)| (n.as_str(), m)).collect();
            let mut seen = std::collections::HashSet::new();
            asked
                .iter()
                .map(|u| {
                    let name = u.name.as_str();
                    if !seen.insert(name) {
                        return result(
                            name,
                            ResponseError::DuplicateResource.code(),
                            Some(format!("user {name:?} is asked for twice")),
                        );
                    }
                    match by_name.get(name) {
                        Some(m) => result(name, 0, None).with_credential_infos(infos(m)),
                        None => result(
                            name,
                            ResponseError::ResourceNotFound.code(),
                            Some(format!(
                                "attempt to describe a user credential that does not exist: {name}"
                            )),
                        ),
                    }
                })
                .collect()
        }
    };
    answer.with_results(results)
}

/// One user's answer.
fn altered(user: &str, code: i16, message: Option<String>) -> AlterUserScramCredentialsResult {
    AlterUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.to_owned()))
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string))
}

pub async fn alter(
    ctx: &Context,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // Every user named, in the order first named.
    let mut order: Vec<String> = Vec::new();
    let mut note = |name: &str| {
        if !order.iter().any(|n| n == name) {
            order.push(name.to_owned());
        }
    };
    for d in &request.deletions {
        note(d.name.as_str());
    }
    for u in &request.upsertions {
        note(u.name.as_str());
    }
    let Some(door) = ctx.door() else {
        let results = order.iter().map(|u| altered(u, NOT_READY, None)).collect();
        return AlterUserScramCredentialsResponse::default().with_results(results);
    };
    // The changes, and the users refused before the store sees them.
    let mut refused: BTreeMap<String, (i16, String)> = BTreeMap::new();
    let mut changes = Vec::new();
    let unsupported = |code: i8| {
        (
            ResponseError::UnsupportedSaslMechanism.code(),
            format!("mechanism {code} is not SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2)"),
        )
    };
    for d in request.deletions {
        let user = d.name.as_str().to_owned();
        match Mechanism::from_code(d.mechanism) {
            Some(mechanism) => changes.push(Alteration::Delete { user, mechanism }),
            None => {
                refused.entry(user).or_insert(unsupported(d.mechanism));
            }
        }
    }
    for u in request.upsertions {
        let user = u.name.as_str().to_owned();
        let Some(mechanism) = Mechanism::from_code(u.mechanism) else {
            refused.entry(user).or_insert(unsupported(u.mechanism));
            continue;
        };
        let iterations = u32::try_from(u.iterations).unwrap_or(0);
        match ScramCredential::from_salted_password(
            mechanism,
            u.salt.to_vec(),
            &u.salted_password,
            iterations,
        ) {
            Ok(credential) => changes.push(Alteration::Upsert { user, credential }),
            Err(e) => {
                refused
                    .entry(user)
                    .or_insert((ResponseError::UnacceptableCredential.code(), e.to_string()));
            }
        }
    }
    changes.retain(|c| !refused.contains_key(c.user()));
    let answers: BTreeMap<String, Result<(), AlterRefusal>> =
        match door.alter_user_credentials(changes).await {
            Ok(answers) => answers.into_iter().collect(),
            Err(e) => {
                let (code, message) = (broker_code(&e), e.to_string());
                let results = order
                    .iter()
                    .map(|u| altered(u, code, Some(message.clone())))
                    .collect();
                return AlterUserScramCredentialsResponse::default().with_results(results);
            }
        };
    let results = order
        .iter()
        .map(|user| {
            if let Some((code, message)) = refused.get(user) {
                return altered(user, *code, Some(message.clone()));
            }
            match answers.get(user) {
                Some(Ok(())) | None => altered(user, 0, None),
                Some(Err(refusal)) => {
                    let (code, message) = refusal_code(refusal);
                    altered(user, code, Some(message))
                }
            }
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

/// Kafka's code and message of a store's refusal of one user's changes.
fn refusal_code(refusal: &AlterRefusal) -> (i16, String) {
    match refusal {
        AlterRefusal::Duplicate { mechanism } => (
            ResponseError::DuplicateResource.code(),
            format!("more than one change of {} for the user", mechanism.name()),
        ),
        AlterRefusal::InvalidName => (
            ResponseError::UnacceptableCredential.code(),
            "the user name is empty, too long, has control characters or is *".into(),
        ),
        AlterRefusal::NoCredential { mechanism } => (
            ResponseError::ResourceNotFound.code(),
            format!("the user has no {} credential to delete", mechanism.name()),
        ),
        AlterRefusal::Store(e) => (
            broker_code(&tidelog_broker::BrokerError::User { source: e.clone() }),
            e.to_string(),
        ),
    }
}
