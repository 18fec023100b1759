//! `configs/broker.yaml` serves as shipped, so it cannot rot.
//!
//! One value is changed before starting: the 1 GiB CommitLog segment, which
//! the server would preallocate and fault in (a gigabyte of page cache per
//! test run). The test checks the line is there to replace, so an edit of
//! the file that drops or renames it fails here instead of going unnoticed.
#![allow(clippy::unwrap_used)]

mod common;

use common::{workspace_root, TidelogProcess};
use serde_json::json;

#[test]
fn shipped_broker_yaml_serves_its_topics() {
    let shipped = std::fs::read_to_string(workspace_root().join("configs/broker.yaml")).unwrap();
    let segment_line = "commitlog_segment_bytes: 1073741824";
    assert!(
        shipped.contains(segment_line),
        "broker.yaml changed: update this test"
    );
    let yaml = shipped.replace(segment_line, "commitlog_segment_bytes: 4194304");

    let mut s = TidelogProcess::start_with_config(&yaml);
    assert_eq!(s.get("/topics").expect(200), json!(["events", "users"]));
    let events = s.get("/topics/events").expect(200);
    assert_eq!(events["configs"]["cleanup.policy"], "delete");
    assert_eq!(events["partitions"].as_array().unwrap().len(), 4);
    let users = s.get("/topics/users").expect(200);
    assert_eq!(users["configs"]["cleanup.policy"], "compact");
    assert_eq!(users["configs"]["delete.retention.ms"], "86400000");
    assert_eq!(users["partitions"].as_array().unwrap().len(), 4);
    assert_eq!(
        s.get("/v3/clusters").expect(200)["data"][0]["cluster_id"],
        "tidelog"
    );
    // --listen and --data-dir from the command line won over the file.
    assert!(s.data_dir.path().join("config/topics.json").is_file());

    let status = s.terminate();
    assert!(status.success(), "{status:?}\n{}", s.log());
}
