//! The served Kafka APIs, each written once, as a row of [`ROUTES`]: its
//! key, its version range (KAFKA.md's table), its name, the walk that
//! checks its body before decoding (`precheck`) and its route (decode the
//! typed request, call the typed handler, encode the answer).
//!
//! Every list of APIs is derived from this table: what ApiVersions
//! advertises ([`served`], in the table's order), what dispatch answers
//! (any other key closes the connection, KAFKA.md "Bad input"), the
//! version range it checks, and the name `/metrics` counts a request
//! under ([`route`]).
//!
//! Invariants (tested in `routes_tests.rs`):
//! * A key has at most one row.
//! * A row's range lies inside what `kafka-protocol` decodes and encodes
//!   for its key, and its name is its key's.
//! * A route is called only with a version inside its row's range and a
//!   body its walk passed (`dispatch`); it answers at that version.

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};

use crate::call::{Call, Served};
use crate::handlers;
use crate::precheck;

/// One served API.
pub struct Route {
    pub key: ApiKey,
    /// The lowest and highest version served (KAFKA.md "APIs and
    /// versions").
    pub min: i16,
    pub max: i16,
    /// What `/metrics` and errors call it: its key's name.
    pub name: &'static str,
    /// The structural check of its body, before decoding.
    pub(crate) walk: precheck::Body,
    /// Decodes the typed request, calls the handler, encodes the answer.
    pub(crate) serve: for<'a> fn(Call<'a>) -> Served<'a>,
}

/// A row: `route!(Key, min..=max, walk, serve)`; the name is the key's.
macro_rules! route {
    ($key:ident, $min:literal ..= $max:literal, $walk:path, $serve:path) => {
        Route {
            key: ApiKey::$key,
            min: $min,
            max: $max,
            name: stringify!($key),
            walk: $walk,
            serve: $serve,
        }
    };
}

/// The served APIs and their version ranges, in the order ApiVersions
/// lists them.
pub static ROUTES: &[Route] = &[
    route!(Produce, 3..=9, precheck::produce, produce),
    route!(Fetch, 4..=12, precheck::fetch, fetch),
    route!(ListOffsets, 1..=7, precheck::list_offsets, list_offsets),
    route!(Metadata, 0..=12, precheck::metadata, metadata),
    route!(ApiVersions, 0..=3, precheck::api_versions, api_versions),
    // The group APIs (KAFKA.md "Groups").
    route!(OffsetCommit, 2..=9, precheck::offset_commit, offset_commit),
    route!(OffsetFetch, 1..=9, precheck::offset_fetch, offset_fetch),
    route!(
        FindCoordinator,
        0..=4,
        precheck::find_coordinator,
        find_coordinator
    ),
    route!(JoinGroup, 0..=7, precheck::join_group, join_group),
    route!(Heartbeat, 0..=4, precheck::heartbeat, heartbeat),
    route!(LeaveGroup, 0..=4, precheck::leave_group, leave_group),
    route!(SyncGroup, 0..=5, precheck::sync_group, sync_group),
    route!(
        DescribeGroups,
        0..=5,
        precheck::describe_groups,
        describe_groups
    ),
    route!(ListGroups, 0..=5, precheck::list_groups, list_groups),
    route!(OffsetDelete, 0..=0, precheck::offset_delete, offset_delete),
    route!(DeleteGroups, 0..=2, precheck::delete_groups, delete_groups),
    // KIP-848's consumer group protocol (KAFKA.md "KIP-848 groups").
    route!(
        ConsumerGroupHeartbeat,
        0..=1,
        precheck::consumer_group_heartbeat,
        consumer_group_heartbeat
    ),
    route!(
        ConsumerGroupDescribe,
        0..=1,
        precheck::consumer_group_describe,
        consumer_group_describe
    ),
    // The admin APIs (KAFKA.md "Admin").
    route!(CreateTopics, 2..=7, precheck::create_topics, create_topics),
    route!(DeleteTopics, 1..=6, precheck::delete_topics, delete_topics),
    route!(
        CreatePartitions,
        0..=3,
        precheck::create_partitions,
        create_partitions
    ),
    route!(
        DeleteRecords,
        0..=2,
        precheck::delete_records,
        delete_records
    ),
    route!(
        DescribeConfigs,
        1..=4,
        precheck::describe_configs,
        describe_configs
    ),
    route!(AlterConfigs, 0..=2, precheck::alter_configs, alter_configs),
    route!(
        IncrementalAlterConfigs,
        0..=1,
        precheck::incremental_alter_configs,
        incremental_alter_configs
    ),
    route!(
        DescribeCluster,
        0..=1,
        precheck::describe_cluster,
        describe_cluster
    ),
    // Idempotent producers (KAFKA.md "Idempotent producers").
    route!(
        InitProducerId,
        0..=4,
        precheck::init_producer_id,
        init_producer_id
    ),
    // Transactions (KAFKA.md "Transactions").
    route!(
        AddPartitionsToTxn,
        0..=3,
        precheck::add_partitions_to_txn,
        add_partitions_to_txn
    ),
    route!(
        AddOffsetsToTxn,
        0..=3,
        precheck::add_offsets_to_txn,
        add_offsets_to_txn
    ),
    route!(EndTxn, 0..=3, precheck::end_txn, end_txn),
    route!(
        TxnOffsetCommit,
        0..=3,
        precheck::txn_offset_commit,
        txn_offset_commit
    ),
    route!(
        DescribeTransactions,
        0..=0,
        precheck::describe_transactions,
        describe_transactions
    ),
    route!(
        ListTransactions,
        0..=1,
        precheck::list_transactions,
        list_transactions
    ),
    route!(
        DescribeProducers,
        0..=0,
        precheck::describe_producers,
        describe_producers
    ),
    // ACLs and users (docs/SECURITY.md).
    route!(DescribeAcls, 1..=3, precheck::describe_acls, describe_acls),
    route!(CreateAcls, 1..=3, precheck::create_acls, create_acls),
    route!(DeleteAcls, 1..=3, precheck::delete_acls, delete_acls),
    route!(
        DescribeUserScramCredentials,
        0..=0,
        precheck::describe_user_scram_credentials,
        describe_user_scram_credentials
    ),
    route!(
        AlterUserScramCredentials,
        0..=0,
        precheck::alter_user_scram_credentials,
        alter_user_scram_credentials
    ),
    // SASL logins: SCRAM and PLAIN (docs/SECURITY.md).
    route!(
        SaslHandshake,
        0..=1,
        precheck::sasl_handshake,
        sasl_handshake
    ),
    route!(
        SaslAuthenticate,
        0..=2,
        precheck::sasl_authenticate,
        sasl_authenticate
    ),
];

/// The row of `key`, if it is served.
pub fn route(key: ApiKey) -> Option<&'static Route> {
    ROUTES.iter().find(|r| r.key == key)
}

/// What a SASL listener (SASL_PLAINTEXT, SASL_SSL) serves before a
/// login, as Kafka does: the versions, and the login itself. Any other
/// request on such a connection closes it (`dispatch`).
pub const BEFORE_LOGIN: [ApiKey; 3] = [
    ApiKey::ApiVersions,
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
];

/// Whether `key` is served on a SASL listener before a login.
pub fn served_before_login(key: ApiKey) -> bool {
    BEFORE_LOGIN.contains(&key)
}

/// (key, min, max) of every row, in the table's order: what ApiVersions
/// advertises.
pub fn served() -> impl Iterator<Item = (ApiKey, i16, i16)> {
    ROUTES.iter().map(|r| (r.key, r.min, r.max))
}

// The routes, one per row: decode, call the handler, encode. Each is
// boxed (`Served`) so the rows share one fn-pointer type.

/// A route whose handler takes the context, then `version` and/or the
/// admin `gate` as named, then the typed request (` async`: awaited).
macro_rules! serve {
    ($name:ident($($arg:ident),*)) => {
        fn $name(mut call: Call<'_>) -> Served<'_> {
            Box::pin(async move {
                let request = call.decode()?;
                let answer = handlers::$name::handle(call.ctx, $(serve!(@$arg call),)* request);
                call.answer(&answer)
            })
        }
    };
    ($name:ident($($arg:ident),*) async) => {
        fn $name(mut call: Call<'_>) -> Served<'_> {
            Box::pin(async move {
                let request = call.decode()?;
                let answer =
                    handlers::$name::handle(call.ctx, $(serve!(@$arg call),)* request).await;
                call.answer(&answer)
            })
        }
    };
    (@version $call:ident) => {
        $call.version
    };
    (@gate $call:ident) => {
        handlers::admin::Gate::new($call.ctx, $call.session)
    };
}

fn api_versions(mut call: Call<'_>) -> Served<'_> {
    Box::pin(async move {
        let _request: ApiVersionsRequest = call.decode()?;
        call.answer(&handlers::api_versions::answer(0, served()))
    })
}

serve!(metadata(version) async);

fn produce(mut call: Call<'_>) -> Served<'_> {
    Box::pin(async move {
        let request = call.decode()?;
        match handlers::produce::handle(call.ctx, request).await {
            Some(answer) => call.answer(&answer),
            None => Ok(None),
        }
    })
}

fn fetch(mut call: Call<'_>) -> Served<'_> {
    Box::pin(async move {
        let request = call.decode()?;
        let (answer, held) = handlers::fetch::handle(call.ctx, request).await;
        let frame = call.answer(&answer);
        // Held until the listener has written the answer.
        call.session.answer_held = Some(held);
        frame
    })
}

serve!(list_offsets(version) async);

serve!(find_coordinator(version));

fn join_group(mut call: Call<'_>) -> Served<'_> {
    Box::pin(async move {
        let request = call.decode()?;
        // Kafka names a member's host `/<ip>`.
        let host = call
            .peer
            .map_or_else(String::new, |p| format!("/{}", p.ip()));
        let caller = handlers::join_group::Caller {
            client_id: call.header.client_id.as_ref().map_or("", |c| c.as_str()),
            host: &host,
        };
        let answer = handlers::join_group::handle(call.ctx, call.version, caller, request).await;
        call.answer(&answer)
    })
}

serve!(sync_group(version) async);

serve!(heartbeat());

serve!(leave_group(version));

serve!(offset_commit() async);

serve!(offset_fetch(version));

serve!(list_groups(version));

serve!(describe_groups(version));

fn consumer_group_heartbeat(mut call: Call<'_>) -> Served<'_> {
    Box::pin(async move {
        let request = call.decode()?;
        // Kafka names a member's host `/<ip>`.
        let host = call
            .peer
            .map_or_else(String::new, |p| format!("/{}", p.ip()));
        let client_id = call.header.client_id.as_ref().map_or("", |c| c.as_str());
        let answer = handlers::consumer_group_heartbeat::handle(
            call.ctx,
            call.version,
            client_id,
            &host,
            request,
        );
        call.answer(&answer)
    })
}

serve!(consumer_group_describe());

serve!(offset_delete(gate) async);

serve!(delete_groups(gate) async);

serve!(create_topics(gate, version) async);

serve!(delete_topics(gate, version) async);

serve!(create_partitions(gate) async);

serve!(delete_records(gate) async);

serve!(describe_configs(version));

serve!(alter_configs(gate) async);

serve!(incremental_alter_configs(gate) async);

serve!(describe_cluster(version));
serve!(add_partitions_to_txn() async);
serve!(end_txn() async);
serve!(add_offsets_to_txn() async);
serve!(txn_offset_commit(version) async);
serve!(describe_transactions());
serve!(list_transactions());
serve!(describe_producers());

serve!(init_producer_id(version) async);

fn sasl_handshake(mut call: Call<'_>) -> Served<'_> {
    Box::pin(async move {
        let request = call.decode()?;
        let answer = handlers::sasl::handshake(call.ctx, call.session, call.version, request);
        call.answer(&answer)
    })
}

fn sasl_authenticate(mut call: Call<'_>) -> Served<'_> {
    Box::pin(async move {
        let request = call.decode()?;
        let answer = handlers::sasl::authenticate(call.ctx, call.session, request).await;
        call.answer(&answer)
    })
}

fn describe_acls(mut call: Call<'_>) -> Served<'_> {
    Box::pin(async move {
        let request = call.decode()?;
        call.answer(&handlers::acls::describe(call.ctx, request))
    })
}

fn create_acls(mut call: Call<'_>) -> Served<'_> {
    Box::pin(async move {
        let request = call.decode()?;
        call.answer(&handlers::acls::create(call.ctx, request).await)
    })
}

fn delete_acls(mut call: Call<'_>) -> Served<'_> {
    Box::pin(async move {
        let request = call.decode()?;
        call.answer(&handlers::acls::delete(call.ctx, request).await)
    })
}

fn describe_user_scram_credentials(mut call: Call<'_>) -> Served<'_> {
    Box::pin(async move {
        let request = call.decode()?;
        call.answer(&handlers::scram_users::describe(call.ctx, request))
    })
}

fn alter_user_scram_credentials(mut call: Call<'_>) -> Served<'_> {
    Box::pin(async move {
        let request = call.decode()?;
        call.answer(&handlers::scram_users::alter(call.ctx, request).await)
    })
}

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
