//! The records call's wait against a real broker: it answers a record
//! that arrives while it waits, answers at once with nothing at a timeout
//! of 0, and shutdown ends it.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use tokio::sync::watch;

use super::*;
use crate::consumers::{ConsumersConfig, OffsetReset};
use crate::principal::Principal;
use crate::test_support::{append, open, wait_until};
use crate::topic_config::Overrides;

/// How long a test waits for a call that should answer (generous: the
/// machine is shared); never reached when the code is right.
const ANSWER_WAIT: Duration = Duration::from_secs(30);
/// A records call's timeout that no test reaches.
const LONG: Duration = Duration::from_secs(600);

struct Fixture {
    _dir: tempfile::TempDir,
    door: Door,
    at: ConsumerInstance,
}

/// An instance `i` of group `g` assigned partition 0 of topic `t`, from
/// its beginning.
async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("t", 1, Overrides::new()).unwrap();
    let consumers = Consumers::new(&broker, ConsumersConfig::default());
    let door = broker.door(&Principal::Anonymous);
    let config = InstanceConfig {
        name: Some("i".into()),
        auto_offset_reset: OffsetReset::Earliest,
        auto_commit: false,
        ..InstanceConfig::default()
    };
    let instance = door.create_consumer(&consumers, "g", config).await.unwrap();
    let at = ConsumerInstance {
        consumers,
        group: "g".into(),
        instance,
    };
    door.assign(&at, vec![TopicPartition::new("t", 0)])
        .await
        .unwrap();
    Fixture {
        _dir: dir,
        door,
        at,
    }
}

/// Answers the offsets of the records a try returned.
struct Offsets;

impl RecordsAnswer for Offsets {
    type Answer = Vec<u64>;
    type Error = BrokerError;

    fn max_bytes(&mut self) -> Result<usize, BrokerError> {
        Ok(1 << 20)
    }

    fn render(
        &self,
    ) -> impl FnOnce(&[PolledRecords]) -> Result<Vec<u64>, BrokerError> + Send + 'static {
        |batches| {
            Ok(batches
                .iter()
                .flat_map(|b| b.records.iter().map(|r| r.offset()))
                .collect())
        }
    }
}

#[tokio::test]
async fn a_waiting_records_call_answers_the_record_that_arrives() {
    let f = fixture().await;
    let (_stop, stopped) = watch::channel(false);
    let waiting = tokio::spawn({
        let (door, at) = (f.door.clone(), f.at.clone());
        async move { door.poll_records(&at, &mut Offsets, LONG, stopped).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    append(f.door.broker(), "t", &[("k", "v")]);
    let offsets = tokio::time::timeout(ANSWER_WAIT, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(offsets, [0]);
}

#[tokio::test]
async fn a_records_call_with_timeout_zero_answers_what_there_is_at_once() {
    let f = fixture().await;
    let (_stop, stopped) = watch::channel(false);
    let mut answer = Offsets;
    let polled = f
        .door
        .poll_records(&f.at, &mut answer, Duration::ZERO, stopped.clone());
    let offsets = tokio::time::timeout(ANSWER_WAIT, polled).await.unwrap();
    assert_eq!(offsets.unwrap(), Vec::<u64>::new());
    append(f.door.broker(), "t", &[("k", "v"), ("k", "w")]);
    // Straight into the store: no produce acknowledged them, so the
    // call's read-your-writes wait does not cover them.
    let part = f.door.partition("t", 0).unwrap();
    wait_until("the records to be dispatched", || part.offsets().1 >= 2);
    let polled = f
        .door
        .poll_records(&f.at, &mut answer, Duration::ZERO, stopped);
    let offsets = tokio::time::timeout(ANSWER_WAIT, polled).await.unwrap();
    assert_eq!(offsets.unwrap(), [0, 1]);
}

#[tokio::test]
async fn shutdown_ends_a_waiting_records_call_with_what_there_is() {
    let f = fixture().await;
    let (stop, stopped) = watch::channel(false);
    let waiting = tokio::spawn({
        let (door, at) = (f.door.clone(), f.at.clone());
        async move { door.poll_records(&at, &mut Offsets, LONG, stopped).await }
    });
    // Most likely waiting by now; shutdown answers the same either way.
    tokio::time::sleep(Duration::from_millis(50)).await;
    stop.send_replace(true);
    let offsets = tokio::time::timeout(ANSWER_WAIT, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(offsets, Vec::<u64>::new());
}

/// With authorization on, a pattern subscription holds only the topics
/// its subscriber may READ (as a Kafka consumer's pattern matches only
/// the topics its Metadata shows it), and a READ revoked since then stops
/// its records calls, as Kafka's Fetch answers TOPIC_AUTHORIZATION_FAILED.
#[tokio::test]
async fn a_pattern_holds_only_topics_its_subscriber_may_read() {
    use tidelog_security::acl::{
        AclBinding, AclFilter, Host, PatternType, Permission, ResourcePattern, ResourceType,
    };
    use tidelog_security::config::SecurityConfig;

    let dir = tempfile::tempdir().unwrap();
    let config = crate::BrokerConfig {
        security: SecurityConfig {
            authorization: true,
            ..SecurityConfig::default()
        },
        // The group forms at the subscription, not 3 s later.
        groups: crate::coordinator::GroupsConfig {
            initial_rebalance_delay_ms: 0,
            ..crate::coordinator::GroupsConfig::default()
        },
        ..crate::BrokerConfig::default()
    };
    let broker = crate::test_support::open_with(dir.path(), &config);
    let admin = broker.door(&Principal::AdminToken);
    for topic in ["a-1", "b-1"] {
        broker.create_topic(topic, 1, Overrides::new()).unwrap();
        append(&broker, topic, &[("k", topic)]);
        let part = admin.partition(topic, 0).unwrap();
        wait_until("the record to be dispatched", || part.offsets().1 >= 1);
    }
    let read = |resource_type, name: &str| AclBinding {
        pattern: ResourcePattern {
            resource_type,
            name: name.into(),
            pattern_type: PatternType::Literal,
        },
        principal: "User:alice".into(),
        host: Host::Any,
        operation: Operation::Read,
        permission: Permission::Allow,
    };
    let created = admin
        .create_acls(vec![
            read(ResourceType::Group, "g"),
            read(ResourceType::Topic, "a-1"),
        ])
        .await
        .unwrap();
    assert!(created.iter().all(Result::is_ok));

    let consumers = Consumers::new(&broker, ConsumersConfig::default());
    let alice = broker.door(&Principal::user("alice"));
    let config = InstanceConfig {
        name: Some("i".into()),
        auto_offset_reset: OffsetReset::Earliest,
        auto_commit: false,
        ..InstanceConfig::default()
    };
    let instance = alice
        .create_consumer(&consumers, "g", config)
        .await
        .unwrap();
    let at = ConsumerInstance {
        consumers,
        group: "g".into(),
        instance,
    };
    alice
        .subscribe(&at, Subscription::Pattern("[ab]-1".into()))
        .await
        .unwrap();
    assert_eq!(alice.subscription(&at).await.unwrap(), ["a-1"]);
    assert_eq!(
        alice.assignments(&at).await.unwrap(),
        [TopicPartition::new("a-1", 0)]
    );
    let (_stop, stopped) = watch::channel(false);
    let mut answer = Offsets;
    let polled = alice.poll_records(&at, &mut answer, Duration::ZERO, stopped.clone());
    let offsets = tokio::time::timeout(ANSWER_WAIT, polled).await.unwrap();
    assert_eq!(offsets.unwrap(), [0], "a-1's record, and only it");

    let revoke = AclFilter {
        resource_type: Some(ResourceType::Topic),
        name: Some("a-1".into()),
        ..AclFilter::any()
    };
    admin.delete_acls(vec![revoke]).await.unwrap();
    let polled = alice.poll_records(&at, &mut answer, Duration::ZERO, stopped);
    let refused = tokio::time::timeout(ANSWER_WAIT, polled).await.unwrap();
    assert!(
        matches!(
            refused,
            Err(BrokerError::NotAuthorized {
                operation: Operation::Read,
                resource_type: ResourceType::Topic,
                ..
            })
        ),
        "{refused:?}"
    );
}
