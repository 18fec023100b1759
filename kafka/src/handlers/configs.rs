//! What the config APIs share: Kafka's resource types and config
//! sources, and one resource's alter (DescribeConfigs,
//! IncrementalAlterConfigs, AlterConfigs).
//!
//! A topic's configs are the HTTP admin API's (`topic_config`): the same
//! names, values, validation and persistence (`Broker::alter_topic`, all
//! or nothing per topic). The broker's own configs come from broker.yaml
//! and are read-only here; an alter of one is INVALID_REQUEST.

use kafka_protocol::protocol::StrBytes;
use tidelog_broker::registry::{ChangesOf, Topic};
use tidelog_broker::{BrokerError, Door};

use super::admin;
use crate::context::Context;
use crate::error::Refusal;

/// Kafka's `ConfigResource.Type`.
pub const TOPIC: i8 = 2;
pub const BROKER: i8 = 4;

/// Kafka's `ConfigSource`.
pub const SOURCE_TOPIC: i8 = 1;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;

/// A resource answer's error code and message (0 and none for success).
pub fn error_parts(outcome: Result<(), Refusal>) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err(refusal) => (
            refusal.code(),
            Some(StrBytes::from_string(refusal.to_string())),
        ),
    }
}

/// The broker id the one broker resource is named by (`""` is the
/// cluster-wide default, which tidelog answers the same).
pub fn check_broker_name(name: &str) -> Result<(), Refusal> {
    if name.is_empty() || name == "0" {
        return Ok(());
    }
    Err(Refusal::UnknownBroker {
        name: name.to_owned(),
    })
}

/// Alters one resource: a topic's configs by the changes `changes`
/// computes from the topic as it is (`None` removes an override), applied
/// all or nothing, or only checked when `validate_only`. The changes are
/// computed again from the topic as the registry holds it under its lock
/// (`Broker::alter_topic_with`), so two alters of one topic at once (an
/// APPEND and a SUBTRACT, an AlterConfigs replacing) never lose one; the
/// first computation, on the topic as it is now, answers a malformed
/// request's refusal with its own code.
pub async fn alter(
    ctx: &Context,
    gate: admin::Gate,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    changes: impl Fn(&Topic) -> Result<Vec<(String, Option<String>)>, BrokerError>
        + Send
        + Sync
        + 'static,
) -> Result<(), Refusal> {
    match resource_type {
        TOPIC => {
            if let Some(refusal) = gate.refusal(admin::TOPIC) {
                return Err(refusal);
            }
        }
        BROKER => {
            if let Some(refusal) = gate.refusal(admin::CLUSTER) {
                return Err(refusal);
            }
            check_broker_name(name)?;
            return Err(Refusal::StaticBrokerConfigs);
        }
        other => {
            return Err(Refusal::UnknownResourceType {
                resource_type: other,
            })
        }
    }
    let door: Door = ctx.door().ok_or(Refusal::NotReady)?;
    // DESCRIBE_CONFIGS, which ALTER_CONFIGS implies: the alter's own
    // check follows in `alter_topic`.
    let topic = door.topic_configs(name)?;
    let now = changes(&topic)?;
    let name = name.to_owned();
    let logged = name.clone();
    let changes_of: Box<ChangesOf<'static>> = if validate_only {
        Box::new(move |_| Ok(now.clone()))
    } else {
        // What fails here failed above already (a malformed request fails
        // whatever the topic holds).
        Box::new(changes)
    };
    door.alter_topic(&name, changes_of, validate_only).await?;
    if !validate_only {
        tracing::info!(topic = %logged, "altered topic configs over Kafka");
    }
    Ok(())
}
