//! Kafka's authorized operations (KIP-430): the bit field of a Metadata,
//! DescribeCluster or DescribeGroups answer when the request asks for it
//! (`include_*_authorized_operations`), bit `1 << code` set for each
//! operation of the resource's type the caller may perform. Each bit is
//! the door's own check ([`Door::may`]), the one every call of that
//! operation makes: with no authorizer running, every operation; with
//! ACLs, what they allow. Not asked for, Kafka answers `i32::MIN`.

use tidelog_broker::security::acl::{Operation, Resource, ResourceType};
use tidelog_broker::Door;

/// Kafka's "operations not asked for".
pub const OMITTED: i32 = i32::MIN;

/// The operations Kafka defines for `resource_type`
/// (`AclEntry.supportedOperations`).
fn supported(resource_type: ResourceType) -> &'static [Operation] {
    use Operation::*;
    match resource_type {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        _ => &[],
    }
}

/// The caller's operations on `resource` when `asked`, else [`OMITTED`].
pub fn of(door: &Door, resource: Resource<'_>, asked: bool) -> i32 {
    if !asked {
        return OMITTED;
    }
    supported(resource.resource_type)
        .iter()
        .filter(|op| door.may(**op, resource))
        .fold(0, |bits, op| bits | 1 << op.code())
}
