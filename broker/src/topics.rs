//! The door's topic calls: create (every rule once, for every front-end,
//! with validate-only), describe, list, and the lookup Kafka's Metadata
//! makes, which may auto-create.
//!
//! Rules of a create, in order: the name; the replication factor (1, or
//! -1 / none for the default: one node holds one copy); no manual replica
//! assignment; the partition count (the broker's `default_partitions`
//! when none is given, else 1..=`PARTITIONS_MAX`); the configs, each
//! known and in bounds, and their combination; then, for validate-only,
//! that the topic does not exist yet. A create writes and syncs the
//! registry, so it runs on the blocking pool.

use std::sync::Arc;

use tidelog_storage::StoreError;

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::names;
use crate::principal::Principal;
use crate::registry::{check_partitions, Topic};
use crate::topic_config::{self, Overrides};

/// A topic to create, as a front-end decoded it.
#[derive(Debug, Clone, Default)]
pub struct CreateTopic {
    pub name: String,
    /// `None`: the broker's `default_partitions` (Kafka's -1 too).
    pub partitions: Option<i64>,
    /// `None` or -1: the default, 1.
    pub replication_factor: Option<i64>,
    /// Replicas the client assigned itself (Kafka's `assignments`): for
    /// each partition index, its replicas' broker ids. Empty: none (the
    /// partition count and replication factor decide). On one node the
    /// only replica a partition can have is this broker ([`NODE_ID`]).
    pub assignment: Vec<(i32, Vec<i32>)>,
    /// Config overrides by Kafka name; `None` values are ignored as Kafka
    /// does for a create.
    pub configs: Vec<(String, Option<String>)>,
}

/// This node's broker id, in Kafka's Metadata and in replica assignments:
/// a single node is broker 0.
pub const NODE_ID: i32 = 0;

/// A create's manual assignment checked as Kafka's `AdminUtils` and
/// `ReplicationControlManager` check it: the partition count it makes, or
/// `None` without one. It may not come with a partition count or a
/// replication factor; its partitions are 0..n, each once; each lists
/// its replicas once, each one of `brokers` (on one node the only broker
/// there is, [`NODE_ID`]; in a cluster its nodes, every one of which
/// holds every partition anyway).
fn check_assignment(request: &CreateTopic, brokers: &[i32]) -> Result<Option<u32>, BrokerError> {
    if request.assignment.is_empty() {
        return Ok(None);
    }
    let invalid = |reason: String| Err(BrokerError::InvalidReplicaAssignment { reason });
    let given = |v: Option<i64>| v.is_some_and(|n| n != -1);
    if given(request.partitions) || given(request.replication_factor) {
        return invalid(
            "a replica assignment comes without a partition count and a replication factor (both -1)"
                .into(),
        );
    }
    let count = request.assignment.len();
    if count > crate::registry::PARTITIONS_MAX as usize {
        return Err(BrokerError::InvalidPartitionCount {
            requested: count as i64,
            max: crate::registry::PARTITIONS_MAX,
        });
    }
    let mut seen = vec![false; count];
    for (partition, replicas) in &request.assignment {
        let slot = usize::try_from(*partition)
            .ok()
            .and_then(|p| seen.get_mut(p));
        match slot {
            Some(slot) if !*slot => *slot = true,
            _ => {
                return invalid(format!(
                    "partitions must be 0..{count}, each once; partition {partition} is not"
                ))
            }
        }
        check_replicas(&format!("partition {partition}"), replicas, brokers)?;
    }
    Ok(Some(count as u32))
}

/// One partition's assigned replicas (`what` names it): at least one,
/// each of `brokers`, none twice.
fn check_replicas(what: &str, replicas: &[i32], brokers: &[i32]) -> Result<(), BrokerError> {
    let invalid = |reason: String| Err(BrokerError::InvalidReplicaAssignment { reason });
    let named = |ids: &[i32]| {
        ids.iter()
            .map(i32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if replicas.is_empty() {
        return invalid(format!("{what} has no replica"));
    }
    if let Some(unknown) = replicas.iter().find(|b| !brokers.contains(b)) {
        return invalid(match brokers {
            [only] => {
                format!("{what}: broker {unknown} does not exist; this node is broker {only}")
            }
            _ => format!(
                "{what}: broker {unknown} does not exist; the brokers are {}",
                named(brokers)
            ),
        });
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != replicas.len() {
        return invalid(format!(
            "{what} lists a broker twice ({}); each replica is another broker",
            named(replicas)
        ));
    }
    Ok(())
}

/// Partitions to add to a topic, as a front-end decoded them (Kafka's
/// CreatePartitions, HTTP's `PATCH .../topics/{name}`).
#[derive(Debug, Clone)]
pub struct AddPartitions {
    pub topic: String,
    /// The partition count the topic is to have: more than it has.
    pub count: i64,
    /// Replicas the client assigned the new partitions itself, in order
    /// (Kafka's `assignments`): one list of broker ids per new partition.
    /// `None`: the broker places them.
    pub assignment: Option<Vec<Vec<i32>>>,
}

/// A CreatePartitions assignment checked as Kafka's controller checks it:
/// one entry per new partition, each a list of `brokers` (this node
/// alone, [`NODE_ID`], or a cluster's nodes), none twice.
fn check_new_assignment(
    assignment: &[Vec<i32>],
    adding: u32,
    brokers: &[i32],
) -> Result<(), BrokerError> {
    let invalid = |reason: String| Err(BrokerError::InvalidReplicaAssignment { reason });
    if assignment.len() != adding as usize {
        return invalid(format!(
            "{} assignments for {adding} new partitions; give one per new partition",
            assignment.len()
        ));
    }
    for (i, replicas) in assignment.iter().enumerate() {
        check_replicas(&format!("new partition {i}"), replicas, brokers)?;
    }
    Ok(())
}

/// A topic created, or that would be (validate-only).
#[derive(Debug, Clone)]
pub struct CreatedTopic {
    pub name: String,
    /// The new topic's id; `None` for a validation only.
    pub id: Option<uuid::Uuid>,
    pub partitions: u32,
    pub overrides: Overrides,
}

impl Broker {
    /// Creates `request`'s topic after every rule (module doc); with
    /// `validate_only`, checks all of them, including that the topic does
    /// not exist, and creates nothing.
    pub(crate) async fn create_topic_checked(
        self: &Arc<Self>,
        _who: &Principal,
        request: CreateTopic,
        validate_only: bool,
    ) -> Result<CreatedTopic, BrokerError> {
        let (name, partitions, overrides) = self.check_create(request)?;
        if validate_only {
            if self.registry.get(&name).is_some() {
                return Err(BrokerError::topic_exists(&name));
            }
            return Ok(CreatedTopic {
                name,
                id: None,
                partitions,
                overrides,
            });
        }
        let broker = Arc::clone(self);
        let created = crate::blocking::run(move || {
            let topic = broker.create_topic(&name, partitions, overrides)?;
            Ok(CreatedTopic {
                name,
                id: Some(topic.id),
                partitions,
                overrides: topic.overrides.clone(),
            })
        })
        .await?;
        self.metadata_replicated().await?;
        Ok(created)
    }

    /// Grows `request.topic` to `request.count` partitions after Kafka's
    /// rules, in its order: the topic exists, the count is more than it
    /// has and at most `PARTITIONS_MAX` (an internal topic's is fixed),
    /// then the assignment if one is given. With `validate_only`, checks
    /// them and changes nothing. The topic as it is (or would be).
    pub(crate) async fn add_partitions_checked(
        self: &Arc<Self>,
        _who: &Principal,
        request: AddPartitions,
        validate_only: bool,
    ) -> Result<u32, BrokerError> {
        let topic = self.registry.require(&request.topic)?;
        let count =
            u32::try_from(request.count).map_err(|_| BrokerError::InvalidPartitionCount {
                requested: request.count,
                max: crate::registry::PARTITIONS_MAX,
            })?;
        crate::registry::check_growth(&topic, count)?;
        if let Some(assignment) = &request.assignment {
            check_new_assignment(assignment, count - topic.partitions.get(), &self.brokers())?;
        }
        if validate_only {
            return Ok(count);
        }
        let broker = Arc::clone(self);
        let count = crate::blocking::run(move || {
            let topic = broker.add_partitions(&request.topic, count)?;
            Ok(topic.partitions.get())
        })
        .await?;
        self.metadata_replicated().await?;
        Ok(count)
    }

    /// The broker ids a replica assignment may name: this node alone
    /// ([`NODE_ID`]), or a cluster's nodes as its gate knows them (this
    /// one always among them).
    fn brokers(&self) -> Vec<i32> {
        let Some(cluster) = self.cluster() else {
            return vec![NODE_ID];
        };
        let status = cluster.status();
        let mut ids: Vec<i32> = status
            .nodes
            .iter()
            .map(|n| n.node_id)
            .chain([status.node_id])
            .filter_map(|id| i32::try_from(id).ok())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The rules of a create, in order: the name, the partitions and the
    /// overrides it would have.
    fn check_create(&self, request: CreateTopic) -> Result<(String, u32, Overrides), BrokerError> {
        names::validate_topic_name(&request.name)?;
        // Every node of the group holds every topic (the cluster
        // contract): a factor up to their number is what it holds anyway.
        let brokers = self.brokers();
        let nodes = brokers.len();
        match request.replication_factor {
            None | Some(-1) => {}
            Some(n) if n >= 1 && u64::try_from(n).is_ok_and(|n| n <= nodes as u64) => {}
            Some(requested) => {
                return Err(BrokerError::ReplicationFactorImpossible { requested, nodes })
            }
        }
        let assigned = check_assignment(&request, &brokers)?;
        let partitions = match (assigned, request.partitions) {
            (Some(n), _) => n,
            (None, None | Some(-1)) => self.config.default_partitions,
            (None, Some(n)) => {
                u32::try_from(n).map_err(|_| BrokerError::InvalidPartitionCount {
                    requested: n,
                    max: crate::registry::PARTITIONS_MAX,
                })?
            }
        };
        check_partitions(partitions)?;
        let mut overrides = Overrides::new();
        topic_config::apply(
            &mut overrides,
            request
                .configs
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_deref())),
        )?;
        // A bad combination (e.g. compaction settings, its own values with
        // the cluster-wide defaults) fails as the create would.
        self.registry.resolve(&request.name, &overrides)?;
        Ok((request.name, partitions, overrides))
    }

    /// The topic `name`: 40401 / UNKNOWN_TOPIC_OR_PARTITION if unknown.
    pub(crate) fn describe_topic(
        &self,
        _who: &Principal,
        name: &str,
    ) -> Result<Arc<Topic>, BrokerError> {
        self.registry.require(name)
    }

    /// The topic whose id is `id`, internal ones included.
    pub(crate) fn topic_by_id(&self, _who: &Principal, id: uuid::Uuid) -> Option<Arc<Topic>> {
        self.registry.by_id(id)
    }

    /// Every topic, internal ones included, by name.
    pub(crate) fn list_topics(&self, _who: &Principal) -> Vec<Arc<Topic>> {
        self.registry.all()
    }

    /// The topic `name` as Kafka's Metadata asks for it: created with the
    /// default partitions when it is unknown, the client allows it
    /// (`allow_auto_topic_creation`) and so does the broker
    /// (`auto_create_topics`).
    pub(crate) async fn metadata_topic(
        self: &Arc<Self>,
        _who: &Principal,
        name: &str,
        client_allows_create: bool,
    ) -> Result<Arc<Topic>, BrokerError> {
        names::validate_topic_name(name)?;
        self.topic_or_auto_created(name, client_allows_create, false)
            .await
    }

    /// The topic `name`; when it is unknown, created if `create` asks and
    /// the broker's `auto_create_topics` allows (Kafka's Metadata, HTTP's
    /// produce), on the blocking pool: creating writes and syncs the
    /// registry. Not for a request that `writes` while the disk is full:
    /// the append would be refused, and the topic should not outlive the
    /// refusal. The disk-full flag is the store's alone; this reads it.
    pub(crate) async fn topic_or_auto_created(
        self: &Arc<Self>,
        name: &str,
        create: bool,
        writes: bool,
    ) -> Result<Arc<Topic>, BrokerError> {
        if let Some(topic) = self.registry.get(name) {
            return Ok(topic);
        }
        let (broker, name) = (Arc::clone(self), name.to_owned());
        let topic =
            crate::blocking::run(move || broker.auto_create_topic(&name, create, writes)).await?;
        // Created: answered once the in-sync set holds its record.
        self.metadata_replicated().await?;
        Ok(topic)
    }

    /// [`topic_or_auto_created`](Self::topic_or_auto_created) on the
    /// caller's thread.
    pub(crate) fn auto_create_topic(
        &self,
        name: &str,
        create: bool,
        writes: bool,
    ) -> Result<Arc<Topic>, BrokerError> {
        if let Some(topic) = self.registry.get(name) {
            return Ok(topic);
        }
        if !(create && self.config.auto_create_topics) {
            return Err(BrokerError::unknown_topic(name));
        }
        if writes {
            let stats = self.store.stats();
            if stats.disk_full {
                return Err(StoreError::disk_full(
                    stats.disk_used_ratio,
                    &self.store.config().retention,
                )
                .into());
            }
        }
        self.get_or_create_topic(name, self.config.default_partitions)
    }

    /// How many partitions topic `name` has, if it exists (what the group
    /// coordinator's rebalances look up).
    pub(crate) fn partition_count(&self, name: &str) -> Option<u32> {
        self.registry.get(name).map(|t| t.partitions.get())
    }

    /// The broker's static settings, as DescribeConfigs shows them.
    pub(crate) fn settings(&self) -> &crate::BrokerConfig {
        &self.config
    }

    /// The cluster id Metadata, DescribeCluster and the v3 routes name.
    pub fn cluster_id(&self) -> &str {
        &self.config.cluster_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(assignment: Vec<(i32, Vec<i32>)>) -> CreateTopic {
        CreateTopic {
            name: "t".into(),
            partitions: Some(-1),
            replication_factor: Some(-1),
            assignment,
            configs: Vec::new(),
        }
    }

    const ONE: &[i32] = &[NODE_ID];
    const CLUSTER: &[i32] = &[1, 2, 3];

    fn refused(request: CreateTopic) -> String {
        refused_by(request, ONE)
    }

    fn refused_by(request: CreateTopic, brokers: &[i32]) -> String {
        match check_assignment(&request, brokers) {
            Err(BrokerError::InvalidReplicaAssignment { reason }) => reason,
            other => panic!("expected INVALID_REPLICA_ASSIGNMENT, got {other:?}"),
        }
    }

    /// Kafka's rules for a manual assignment, on one node: partitions
    /// 0..n in any order, each once, each on this broker alone; no
    /// partition count or replication factor beside it.
    #[test]
    fn an_assignment_names_this_broker_once_for_partitions_zero_to_n() {
        assert_eq!(check_assignment(&create(Vec::new()), ONE).unwrap(), None);
        let three = vec![(2, vec![NODE_ID]), (0, vec![NODE_ID]), (1, vec![NODE_ID])];
        assert_eq!(check_assignment(&create(three), ONE).unwrap(), Some(3));

        assert!(refused(create(vec![(0, vec![1])])).contains("broker 1 does not exist"));
        assert!(refused(create(vec![(0, vec![0, 0])])).contains("a broker twice"));
        assert!(refused(create(vec![(0, vec![])])).contains("no replica"));
        assert!(refused(create(vec![(1, vec![0])])).contains("partition 1"));
        assert!(refused(create(vec![(0, vec![0]), (0, vec![0])])).contains("each once"));
        assert!(refused(create(vec![(-1, vec![0])])).contains("partition -1"));
        let mut counted = create(vec![(0, vec![0])]);
        counted.partitions = Some(1);
        assert!(refused(counted).contains("without a partition count"));
        let mut factor = create(vec![(0, vec![0])]);
        factor.replication_factor = Some(1);
        assert!(refused(factor).contains("without a partition count"));
    }

    /// In a cluster a partition may list any of its nodes, each once (all
    /// of them hold it anyway); a broker that is no node is refused,
    /// naming the nodes. CreatePartitions' assignment follows the same
    /// rule, one list per new partition.
    #[test]
    fn in_a_cluster_an_assignment_names_its_nodes() {
        let assignment = vec![(0, vec![1, 2, 3]), (1, vec![2]), (2, vec![3, 1])];
        assert_eq!(
            check_assignment(&create(assignment), CLUSTER).unwrap(),
            Some(3)
        );
        let reason = refused_by(create(vec![(0, vec![1, 4])]), CLUSTER);
        assert!(
            reason.contains("broker 4 does not exist; the brokers are 1, 2, 3"),
            "{reason}"
        );
        assert!(refused_by(create(vec![(0, vec![0])]), CLUSTER).contains("broker 0"));
        assert!(refused_by(create(vec![(0, vec![2, 2])]), CLUSTER).contains("twice"));

        check_new_assignment(&[vec![1, 2], vec![3]], 2, CLUSTER).unwrap();
        assert!(matches!(
            check_new_assignment(&[vec![1]], 2, CLUSTER),
            Err(BrokerError::InvalidReplicaAssignment { .. })
        ));
        assert!(matches!(
            check_new_assignment(&[vec![1], vec![7]], 2, CLUSTER),
            Err(BrokerError::InvalidReplicaAssignment { .. })
        ));
        assert!(matches!(
            check_new_assignment(&[vec![1]], 1, ONE),
            Err(BrokerError::InvalidReplicaAssignment { .. })
        ));
    }
}
