//! ListGroups (16): every group with members or committed offsets
//! (`Door::list_groups`, the list HTTP's `GET /consumer-groups`
//! answers), filtered by state from v4 (KIP-518; names compared ignoring
//! case, as Kafka does) and by type from v5 (KIP-848: `classic` or
//! `consumer`, likewise). A Kafka group's protocol type is `consumer`
//! (a KIP-848 group's too), an HTTP group's `http`, an offsets-only
//! group's empty. In a cluster only the master coordinates groups, so a
//! replica lists none, as a Kafka broker lists only the groups it
//! coordinates (admin clients ask every broker and merge the lists).

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::coordinator::ProtocolKind;

use super::cluster::Nodes;
use super::group;
use crate::context::Context;

pub fn handle(ctx: &Context, version: i16, request: ListGroupsRequest) -> ListGroupsResponse {
    let Some(door) = ctx.door() else {
        return ListGroupsResponse::default().with_error_code(group::NOT_READY);
    };
    if !Nodes::of(Some(&door)).leads() {
        return ListGroupsResponse::default();
    }
    let wanted = |state: &str| {
        request.states_filter.is_empty()
            || request
                .states_filter
                .iter()
                .any(|s| s.as_str().eq_ignore_ascii_case(state))
    };
    let typed = |group_type: &str| {
        request.types_filter.is_empty()
            || request
                .types_filter
                .iter()
                .any(|t| t.as_str().eq_ignore_ascii_case(group_type))
    };
    let groups = door
        .list_groups()
        .into_iter()
        .filter(|g| wanted(g.state.name()) && typed(g.group_type.name()))
        .map(|g| {
            let listed = ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(g.group)))
                .with_protocol_type(StrBytes::from_static_str(protocol_type(g.kind)));
            let listed = if version >= 4 {
                listed.with_group_state(StrBytes::from_static_str(g.state.name()))
            } else {
                listed
            };
            if version >= 5 {
                listed.with_group_type(StrBytes::from_static_str(g.group_type.name()))
            } else {
                listed
            }
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}

/// The protocol type a group of `kind` answers.
pub fn protocol_type(kind: Option<ProtocolKind>) -> &'static str {
    match kind {
        Some(ProtocolKind::Kafka) => "consumer",
        Some(ProtocolKind::Http) => "http",
        None => "",
    }
}
