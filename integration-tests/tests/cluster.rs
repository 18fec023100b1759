//! Three tidelog nodes and a real etcd on loopback (issue 39): the master
//! replicates its CommitLog, HTTP produce (acks=all) is acknowledged once
//! the in-sync set holds it, a `kill -9` of the master hands the
//! cluster to another node with no acknowledged record lost, and the old
//! master comes back as a replica whose log ends byte for byte the
//! master's.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{free_local_addr, TidelogProcess};
use serde_json::{json, Value};
use tidelog_integration_tests::etcd::Etcd;

const PARTITIONS: u64 = 2;
/// Bounds every wait of this test (a shared, slow machine), not a
/// figure the test asserts.
const DEADLINE: Duration = Duration::from_secs(90);

fn config(etcd: &str, node_id: u32, replication: SocketAddr) -> String {
    format!(
        r#"store:
  flush: sync
  commitlog_segment_bytes: 1048576
topics:
  - name: t
    partitions: {PARTITIONS}
cluster:
  node_id: {node_id}
  name: itest
  etcd_endpoints: ["{etcd}"]
  replication_listen: "{replication}"
  session_ttl_ms: 2000
  min_insync_replicas: 2
  replica_lag_max_ms: 3000
  replication_timeout_ms: 5000
"#
    )
}

/// What a produce of one record came to.
enum Produced {
    /// Acknowledged at this partition and offset.
    Acked(u64, u64),
    /// Refused (not the master, too few in sync, not ready): not written
    /// as far as the client knows.
    Refused(u64),
    /// No answer (the node is gone).
    Gone,
}

fn produce(node: &TidelogProcess, partition: u64, value: &str) -> Produced {
    let body = json!({"records": [{"value": value, "partition": partition}]});
    let Ok(r) = std::panic::catch_unwind(|| node.send_json("POST", "/topics/t", &body)) else {
        return Produced::Gone;
    };
    let answer = r.json();
    if r.status == 200 {
        let o = &answer["offsets"][0];
        return Produced::Acked(
            o["partition"].as_u64().unwrap(),
            o["offset"].as_u64().unwrap(),
        );
    }
    Produced::Refused(answer["error_code"].as_u64().unwrap_or(0))
}

/// Every record node `n` serves of partition `p`: offset → value.
fn served(node: &TidelogProcess, p: u64) -> BTreeMap<u64, String> {
    let end = node
        .get(&format!("/topics/t/partitions/{p}/offsets"))
        .expect(200)["end_offset"]
        .as_u64()
        .unwrap();
    let mut out = BTreeMap::new();
    let mut next = 0;
    while next < end {
        let got = node
            .get(&format!(
                "/topics/t/partitions/{p}/records?offset={next}&timeout=0"
            ))
            .expect(200);
        let got = got.as_array().unwrap();
        assert!(
            !got.is_empty(),
            "partition {p}: nothing at {next} below {end}"
        );
        for r in got {
            let offset = r["offset"].as_u64().unwrap();
            out.insert(offset, r["value"].as_str().unwrap().to_string());
            next = offset + 1;
        }
    }
    out
}

/// The index of the node that takes a write now, trying each.
fn find_master(nodes: &[&TidelogProcess], probe: &mut u64) -> Option<(usize, (u64, u64, String))> {
    for (i, n) in nodes.iter().enumerate() {
        *probe += 1;
        let value = format!("probe-{probe}");
        if let Produced::Acked(p, o) = produce(n, *probe % PARTITIONS, &value) {
            return Some((i, (p, o, value)));
        }
    }
    None
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn segment_files(dir: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir.join("commitlog"))
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            // A segment made ahead and never written is zeros on one node
            // and not there yet on another.
            let bytes = std::fs::read(e.path()).unwrap();
            bytes.iter().any(|&b| b != 0).then_some((name, bytes))
        })
        .collect()
}

#[test]
fn a_killed_master_is_replaced_and_no_acknowledged_record_is_lost() {
    let etcd = Etcd::start();
    let endpoint = etcd.endpoint();
    let mut nodes: Vec<TidelogProcess> = (1..=3)
        .map(|id| TidelogProcess::start_with_config(&config(&endpoint, id, free_local_addr())))
        .collect();

    // Whoever leads takes the writes; acknowledged means on two nodes.
    let mut acked: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut probe = 0;
    let (master, (p, o, v)) = wait_for("a master", || {
        find_master(&nodes.iter().collect::<Vec<_>>(), &mut probe)
    });
    acked.insert((p, o), v);
    for i in 0..200u64 {
        let value = format!("before-{i}");
        match produce(&nodes[master], i % PARTITIONS, &value) {
            Produced::Acked(p, o) => {
                acked.insert((p, o), value);
            }
            Produced::Refused(code) => panic!("the master refused a write: {code}"),
            Produced::Gone => panic!("the master is gone"),
        }
    }
    // A replica refuses writes itself (HTTP forwarding aside).
    let replica = (master + 1) % 3;
    match produce(&nodes[replica], 0, "to-a-replica") {
        Produced::Acked(..) => {}
        Produced::Refused(code) => assert_eq!(code, 50301, "not the master"),
        Produced::Gone => panic!("the replica is gone"),
    }

    // kill -9 the master; another takes over, with every acknowledged
    // record at its offset.
    nodes[master].kill_9();
    let killed_at = Instant::now();
    let others: Vec<usize> = (0..3).filter(|&i| i != master).collect();
    let (new_master, (p, o, v)) = wait_for("a new master", || {
        let candidates: Vec<&TidelogProcess> = others.iter().map(|&i| &nodes[i]).collect();
        find_master(&candidates, &mut probe).map(|(i, w)| (others[i], w))
    });
    eprintln!(
        "failover: first acknowledged write on node {} {:?} after the kill",
        new_master + 1,
        killed_at.elapsed()
    );
    acked.insert((p, o), v);
    for i in 0..100u64 {
        let value = format!("after-{i}");
        if let Produced::Acked(p, o) = produce(&nodes[new_master], i % PARTITIONS, &value) {
            acked.insert((p, o), value);
        }
    }
    let check = |node: &TidelogProcess, who: &str| {
        for p in 0..PARTITIONS {
            let served = served(node, p);
            for ((ap, ao), value) in acked.iter().filter(|((ap, _), _)| *ap == p) {
                assert_eq!(
                    served.get(ao),
                    Some(value),
                    "{who}: acknowledged record {ap}/{ao} lost or moved"
                );
            }
        }
    };
    check(&nodes[new_master], "the new master");
    let survivor = others.iter().copied().find(|&i| i != new_master).unwrap();
    wait_for("the other replica to hold everything", || {
        (0..PARTITIONS)
            .all(|p| served(&nodes[survivor], p).len() >= served(&nodes[new_master], p).len())
            .then_some(())
    });
    check(&nodes[survivor], "the other replica");

    // The old master comes back, cuts what it held past the common end,
    // and copies on: a replica with every acknowledged record.
    nodes[master].start_again();
    wait_for("the old master to catch up", || {
        (0..PARTITIONS)
            .all(|p| served(&nodes[master], p) == served(&nodes[new_master], p))
            .then_some(())
    });
    check(&nodes[master], "the returned old master");

    // Stopped cleanly once in step: the three logs are the same bytes.
    let ends = |n: &TidelogProcess| -> Vec<Value> {
        (0..PARTITIONS)
            .map(|p| {
                n.get(&format!("/topics/t/partitions/{p}/offsets"))
                    .expect(200)["end_offset"]
                    .clone()
            })
            .collect()
    };
    wait_for("all three at the same ends", || {
        let e = ends(&nodes[new_master]);
        (ends(&nodes[0]) == e && ends(&nodes[1]) == e && ends(&nodes[2]) == e).then_some(())
    });
    // Replicas first, so the master's log is not written past theirs.
    for i in (0..3).filter(|&i| i != new_master).chain([new_master]) {
        assert!(
            nodes[i].terminate().success(),
            "node {} stops cleanly",
            i + 1
        );
    }
    let logs: Vec<_> = nodes
        .iter()
        .map(|n| segment_files(n.data_dir.path()))
        .collect();
    let master_log = &logs[new_master];
    for (i, log) in logs.iter().enumerate() {
        assert_eq!(
            log.keys().collect::<Vec<_>>(),
            master_log.keys().collect::<Vec<_>>(),
            "node {}: the same segments",
            i + 1
        );
        for (name, bytes) in log {
            assert!(
                bytes == &master_log[name],
                "node {}: segment {name} differs from the master's",
                i + 1
            );
        }
    }
}
