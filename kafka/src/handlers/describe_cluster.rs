//! DescribeCluster (60): the brokers and the controller as Metadata names
//! them (`super::cluster`: node 0 at the listener's host and port, the
//! controller, alone; the live nodes, the master the controller (-1
//! while none is known), in a cluster), `cluster_id`. v1's
//! endpoint type must be 1 (brokers); tidelog has no controller
//! endpoints, so 2 is UNSUPPORTED_ENDPOINT_TYPE.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::cluster::Nodes;
use super::{authorized, NOT_READY};
use crate::context::Context;
use tidelog_broker::security::acl::Resource;

pub fn handle(
    ctx: &Context,
    version: i16,
    request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let answer = DescribeClusterResponse::default()
        .with_cluster_authorized_operations(authorized::OMITTED)
        .with_endpoint_type(if version >= 1 {
            request.endpoint_type
        } else {
            1
        });
    if version >= 1 && request.endpoint_type != 1 {
        return answer
            .with_error_code(ResponseError::UnsupportedEndpointType.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "only broker endpoints (1) are served",
            )));
    }
    let Some(door) = ctx.door() else {
        return answer.with_error_code(NOT_READY);
    };
    let nodes = Nodes::of(Some(&door));
    let brokers = nodes
        .brokers(ctx)
        .into_iter()
        .map(|b| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(b.host))
                .with_port(b.port)
        })
        .collect();
    answer
        .with_cluster_authorized_operations(authorized::of(
            &door,
            Resource::cluster(),
            request.include_cluster_authorized_operations,
        ))
        .with_cluster_id(StrBytes::from_string(door.cluster_id().to_owned()))
        .with_controller_id(BrokerId(nodes.master_id(ctx)))
        .with_brokers(brokers)
}
