//! Three tidelog nodes and a real etcd on loopback (issue 39): the master
//! replicates its CommitLog, HTTP produce (acks=all) is acknowledged once
//! the in-sync set holds it, a `kill -9` of the master hands the
//! cluster to another node with no acknowledged record lost, and the old
//! master comes back as a replica whose log ends byte for byte the
//! master's. With `tls`, the nodes prove who they are to each other by
//! certificate and a forwarded write keeps its caller.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{curl_https, free_local_addr, TidelogProcess};
use serde_json::{json, Value};
use tidelog_integration_tests::certs::TestPki;
use tidelog_integration_tests::etcd::Etcd;

const PARTITIONS: u64 = 2;
/// Bounds every wait of this test (a shared, slow machine), not a
/// figure the test asserts.
const DEADLINE: Duration = Duration::from_secs(90);

fn config(etcd: &str, node_id: u32, replication: SocketAddr) -> String {
    config_with(etcd, node_id, replication, 2)
}

fn config_with(etcd: &str, node_id: u32, replication: SocketAddr, min_insync: u32) -> String {
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
  min_insync_replicas: {min_insync}
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
    produce_to(node, "t", partition, value)
}

/// A produce the node answers itself: marked as forwarded already, so a
/// replica refuses it (503 50301) instead of forwarding it to the master.
/// The tests find the master by who takes a write.
fn produce_to(node: &TidelogProcess, topic: &str, partition: u64, value: &str) -> Produced {
    produce_with(
        node,
        topic,
        partition,
        value,
        &[("x-tidelog-forwarded-by", "0")],
    )
}

fn produce_with(
    node: &TidelogProcess,
    topic: &str,
    partition: u64,
    value: &str,
    extra: &[(&str, &str)],
) -> Produced {
    let body = json!({"records": [{"value": value, "partition": partition}]}).to_string();
    let path = format!("/topics/{topic}");
    let mut headers = vec![("Content-Type", "application/json")];
    headers.extend_from_slice(extra);
    let Ok(r) =
        std::panic::catch_unwind(|| node.request("POST", &path, &headers, Some(body.as_bytes())))
    else {
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

/// Every record `node` serves of partition `p`: offset → value.
fn served(node: &TidelogProcess, p: u64) -> BTreeMap<u64, String> {
    try_served(node, p).unwrap_or_else(|| panic!("partition {p}: the node does not serve"))
}

/// [`served`], or `None` while the node does not serve (it is opening its
/// broker again after a role change, say).
fn try_served(node: &TidelogProcess, p: u64) -> Option<BTreeMap<u64, String>> {
    let offsets = node.get(&format!("/topics/t/partitions/{p}/offsets"));
    if offsets.status != 200 {
        return None;
    }
    let end = offsets.json()["end_offset"].as_u64()?;
    let mut out = BTreeMap::new();
    let mut next = 0;
    while next < end {
        let got = node.get(&format!(
            "/topics/t/partitions/{p}/records?offset={next}&timeout=0"
        ));
        if got.status != 200 {
            return None;
        }
        let got = got.json();
        let got = got.as_array()?;
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
    Some(out)
}

/// Whether `a` and `b` serve the same records of every partition now.
fn same_records(a: &TidelogProcess, b: &TidelogProcess) -> bool {
    (0..PARTITIONS).all(|p| {
        let (x, y) = (try_served(a, p), try_served(b, p));
        x.is_some() && x == y
    })
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
    // A replica takes no write of its own; a client's write to it is
    // forwarded to the master and answered as the master answered.
    let replica = (master + 1) % 3;
    match produce(&nodes[replica], 0, "to-a-replica") {
        Produced::Refused(code) => assert_eq!(code, 50301, "not the master"),
        other => panic!(
            "a replica took a write itself: {:?}",
            matches!(other, Produced::Gone)
        ),
    }
    match produce_with(&nodes[replica], "t", 1, "through-a-replica", &[]) {
        Produced::Acked(p, o) => {
            acked.insert((p, o), "through-a-replica".into());
        }
        Produced::Refused(code) => panic!("a forwarded write refused: {code}"),
        Produced::Gone => panic!("the replica is gone"),
    }
    let cluster = nodes[replica].get("/v1/cluster").expect(200);
    assert_eq!(cluster["master"], master as u64 + 1, "{cluster}");
    assert_eq!(cluster["nodes"].as_array().unwrap().len(), 3, "{cluster}");

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
            .all(|p| {
                let (r, m) = (
                    try_served(&nodes[survivor], p),
                    try_served(&nodes[new_master], p),
                );
                matches!((r, m), (Some(r), Some(m)) if r.len() >= m.len())
            })
            .then_some(())
    });
    check(&nodes[survivor], "the other replica");

    // The old master comes back, cuts what it held past the common end,
    // and copies on: a replica with every acknowledged record.
    nodes[master].start_again();
    wait_for("the old master to catch up", || {
        same_records(&nodes[master], &nodes[new_master]).then_some(())
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

/// The whole cluster killed at once (a power cut) and started again:
/// each node kept no watermark past its open (the checkpoints are far
/// apart here), so its recovery holds its whole log back. The node that
/// leads opens again without holding back, so its coordinators hold every
/// commit acknowledged before the cut, and every acknowledged record is
/// served at its offset.
#[test]
fn a_cluster_killed_whole_comes_back_with_every_acknowledged_commit() {
    let etcd = Etcd::start();
    let endpoint = etcd.endpoint();
    let rare_checkpoints = |id: u32| {
        config(&endpoint, id, free_local_addr()).replace(
            "  flush: sync\n",
            "  flush: sync\n  sync_checkpoint_interval_ms: 600000\n",
        )
    };
    let mut nodes: Vec<TidelogProcess> = (1..=3)
        .map(|id| TidelogProcess::start_with_config(&rare_checkpoints(id)))
        .collect();
    let mut probe = 0;
    let mut acked: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let (master, (p, o, v)) = wait_for("a master", || {
        find_master(&nodes.iter().collect::<Vec<_>>(), &mut probe)
    });
    acked.insert((p, o), v);
    let group = "/consumer-groups/g/offsets";
    for i in 0..20u64 {
        let value = format!("before-{i}");
        if let Produced::Acked(p, o) = produce(&nodes[master], i % PARTITIONS, &value) {
            acked.insert((p, o), value);
        }
        nodes[master]
            .send_json(
                "POST",
                group,
                &json!({"offsets": [{"topic": "t", "partition": 0, "offset": i + 1}]}),
            )
            .expect(204);
    }
    let committed = nodes[master].get(group).expect(200);
    assert_eq!(committed["offsets"][0]["offset"], 20, "{committed}");

    for node in &mut nodes {
        node.kill_9();
    }
    for node in &mut nodes {
        node.start_again();
    }
    let all: Vec<&TidelogProcess> = nodes.iter().collect();
    let (master, (p, o, v)) = wait_for("a master after the restart", || {
        find_master(&all, &mut probe)
    });
    acked.insert((p, o), v);
    let log = nodes[master].log();
    assert!(
        log.contains("holding back the log's tail past the kept high watermark"),
        "the restarted master held its tail back at open"
    );
    assert_eq!(
        nodes[master].get(group).expect(200),
        committed,
        "the master's coordinator holds the last commit"
    );
    // A replica's coordinator is what it loaded at its open (here:
    // nothing, all held back): it forwards the group's routes.
    let replica = &nodes[(master + 1) % 3];
    assert_eq!(
        replica.get(group).expect(200),
        committed,
        "a replica answers the master's commits"
    );
    for p in 0..PARTITIONS {
        let served = served(&nodes[master], p);
        for ((ap, ao), value) in acked.iter().filter(|((ap, _), _)| *ap == p) {
            assert_eq!(served.get(ao), Some(value), "record {ap}/{ao}");
        }
    }
}

fn start_three(etcd: &Etcd) -> Vec<TidelogProcess> {
    let endpoint = etcd.endpoint();
    (1..=3)
        .map(|id| TidelogProcess::start_with_config(&config(&endpoint, id, free_local_addr())))
        .collect()
}

/// Writes one record to whichever node takes it, trying each in turn;
/// `None` if none did.
fn produce_anywhere(nodes: &[&TidelogProcess], partition: u64, value: &str) -> Option<(u64, u64)> {
    nodes
        .iter()
        .find_map(|n| match produce(n, partition, value) {
            Produced::Acked(p, o) => Some((p, o)),
            _ => None,
        })
}

/// The Jepsen-style check after healing: every acknowledged record is at
/// its offset on `node`, and no value is served at two places.
fn check_acknowledged(node: &TidelogProcess, acked: &BTreeMap<(u64, u64), String>, who: &str) {
    let mut seen: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for p in 0..PARTITIONS {
        for (offset, value) in served(node, p) {
            if let Some(first) = seen.insert(value.clone(), (p, offset)) {
                panic!(
                    "{who}: {value:?} served twice, at {first:?} and {:?}",
                    (p, offset)
                );
            }
        }
    }
    for ((p, o), value) in acked {
        assert_eq!(
            seen.get(value),
            Some(&(*p, *o)),
            "{who}: acknowledged {value:?} at {p}/{o}"
        );
    }
}

/// A master cut off (paused: neither etcd nor its replicas hear from it,
/// as a partition or a long stall would do): it stops acknowledging, the
/// others elect a successor that goes on, and once it runs again it
/// refuses writes at once (its lease cannot be vouched for), then
/// rejoins as a replica. Every write acknowledged by anyone is there,
/// once, after healing.
#[test]
fn a_cut_off_master_stops_acknowledging_and_nothing_acknowledged_is_lost() {
    let etcd = Etcd::start();
    let nodes = start_three(&etcd);
    let mut probe = 0;
    let (master, (p, o, v)) = wait_for("a master", || {
        find_master(&nodes.iter().collect::<Vec<_>>(), &mut probe)
    });
    let mut acked = BTreeMap::from([((p, o), v)]);
    let mut next = 0u64;
    // Writes to the nodes named (a paused node would hold each request
    // for the client's whole timeout).
    let mut write = |to: &[&TidelogProcess], acked: &mut BTreeMap<(u64, u64), String>| {
        next += 1;
        let value = format!("w-{next}");
        if let Some(at) = produce_anywhere(to, next % PARTITIONS, &value) {
            acked.insert(at, value);
        }
    };
    let all: Vec<&TidelogProcess> = nodes.iter().collect();
    for _ in 0..50 {
        write(&all, &mut acked);
    }
    nodes[master].signal(libc::SIGSTOP);
    let others: Vec<usize> = (0..3).filter(|&i| i != master).collect();
    let successor = wait_for("a successor", || {
        let candidates: Vec<&TidelogProcess> = others.iter().map(|&i| &nodes[i]).collect();
        find_master(&candidates, &mut probe).map(|(i, (p, o, v))| {
            acked.insert((p, o), v);
            others[i]
        })
    });
    let running: Vec<&TidelogProcess> = others.iter().map(|&i| &nodes[i]).collect();
    for _ in 0..50 {
        write(&running, &mut acked);
    }
    nodes[master].signal(libc::SIGCONT);
    // At once: its lease is past the fencing deadline, whatever it
    // believed before the pause.
    match produce(&nodes[master], 0, "to-the-old-master") {
        Produced::Acked(p, o) => panic!("the cut-off master acknowledged a write at {p}/{o}"),
        Produced::Refused(code) => assert_eq!(code, 50301),
        Produced::Gone => panic!("the old master is gone"),
    }
    for _ in 0..50 {
        write(&all, &mut acked);
    }
    wait_for("the old master to catch up", || {
        same_records(&nodes[master], &nodes[successor]).then_some(())
    });
    for (i, n) in nodes.iter().enumerate() {
        check_acknowledged(n, &acked, &format!("node {}", i + 1));
    }
}

/// A replica that stops confirming leaves the in-sync set after
/// `replica_lag_max_ms` and writes go on with the rest; with too few in
/// sync (`min_insync_replicas`), writes are refused with 50306 and
/// nothing is half-acknowledged; replicas that come back rejoin.
#[test]
fn a_lagging_replica_leaves_the_in_sync_set_and_too_few_refuse_writes() {
    let etcd = Etcd::start();
    let nodes = start_three(&etcd);
    let mut probe = 0;
    let (master, _) = wait_for("a master", || {
        find_master(&nodes.iter().collect::<Vec<_>>(), &mut probe)
    });
    let replicas: Vec<usize> = (0..3).filter(|&i| i != master).collect();
    let mut acked = BTreeMap::new();
    let mut n = 0u64;
    let mut produce_to_master = |acked: &mut BTreeMap<(u64, u64), String>| {
        n += 1;
        let value = format!("v-{n}");
        let answer = produce(&nodes[master], n % PARTITIONS, &value);
        if let Produced::Acked(p, o) = answer {
            acked.insert((p, o), value);
        }
        answer
    };
    // One replica stops: acknowledgements resume once it is out of the
    // set (the two left meet min_insync_replicas 2).
    nodes[replicas[0]].signal(libc::SIGSTOP);
    wait_for("writes acknowledged by the two left", || {
        matches!(produce_to_master(&mut acked), Produced::Acked(..)).then_some(())
    });
    // The second stops too: one node in sync, two needed: refused.
    nodes[replicas[1]].signal(libc::SIGSTOP);
    wait_for("writes refused for too few in sync", || {
        matches!(produce_to_master(&mut acked), Produced::Refused(50306)).then_some(())
    });
    let refused_at = served(&nodes[master], 0).len() + served(&nodes[master], 1).len();
    assert!(matches!(
        produce_to_master(&mut acked),
        Produced::Refused(50306)
    ));
    assert_eq!(
        served(&nodes[master], 0).len() + served(&nodes[master], 1).len(),
        refused_at,
        "a write refused for too few in sync is not written"
    );
    // Both come back, catch up and rejoin: acknowledged again.
    nodes[replicas[0]].signal(libc::SIGCONT);
    nodes[replicas[1]].signal(libc::SIGCONT);
    wait_for("writes acknowledged again", || {
        matches!(produce_to_master(&mut acked), Produced::Acked(..)).then_some(())
    });
    for &r in &replicas {
        wait_for("the replica to hold everything", || {
            same_records(&nodes[r], &nodes[master]).then_some(())
        });
        check_acknowledged(&nodes[r], &acked, "a replica back in sync");
    }
}

/// The shipped `configs/cluster/` files pass `check-config` and make a
/// cluster as they are, with only their fixed addresses moved to free
/// ones (tests run side by side) and etcd's endpoint the test's.
#[test]
fn the_shipped_cluster_configs_make_a_cluster() {
    let etcd = Etcd::start();
    let mut nodes = Vec::new();
    for n in 1..=3 {
        let path = common::workspace_root().join(format!("configs/cluster/node{n}.yaml"));
        let out = common::run_tidelog(&["check-config", path.to_str().unwrap()]);
        assert!(out.status.success(), "node{n}.yaml: {out:?}");
        let shipped = std::fs::read_to_string(&path).unwrap();
        let replication = format!("127.0.0.1:950{n}");
        assert!(shipped.contains(&replication) && shipped.contains("http://127.0.0.1:2379"));
        let yaml = shipped
            .replace(&replication, &free_local_addr().to_string())
            .replace("http://127.0.0.1:2379", &etcd.endpoint());
        nodes.push(TidelogProcess::start_with_config(&yaml));
    }
    let (master, (p, o)) = wait_for("a master", || {
        nodes
            .iter()
            .enumerate()
            .find_map(|(i, n)| match produce_to(n, "events", 1, "hello") {
                Produced::Acked(p, o) => Some((i, (p, o))),
                _ => None,
            })
    });
    let replica = (master + 1) % 3;
    wait_for("the record on a replica", || {
        (served_topic(&nodes[replica], "events", p)
            .get(&o)
            .map(String::as_str)
            == Some("hello"))
        .then_some(())
    });
}

/// [`served`] of another topic.
fn served_topic(node: &TidelogProcess, topic: &str, p: u64) -> BTreeMap<u64, String> {
    let answer = node.get(&format!(
        "/topics/{topic}/partitions/{p}/records?offset=0&timeout=0"
    ));
    if answer.status != 200 {
        return BTreeMap::new();
    }
    answer
        .json()
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["offset"].as_u64().unwrap(),
                r["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Failovers under load, the torture run: a writer sends to whichever
/// node takes writes while, 30 times, the master is killed (`kill -9`)
/// and started again. After the last, every acknowledged record is at its
/// offset on every node and no value is served twice.
#[test]
fn thirty_failovers_under_load_lose_nothing_acknowledged() {
    const FAILOVERS: usize = 30;
    let etcd = Etcd::start();
    let mut nodes = start_three(&etcd);
    let mut acked: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut next = 0u64;
    let mut times = Vec::new();
    for round in 0..FAILOVERS {
        // Writes until the master is known, then a few more on it.
        let master = wait_for("a master", || {
            next += 1;
            let value = format!("r{round}-{next}");
            nodes.iter().enumerate().find_map(|(i, n)| {
                match produce(n, next % PARTITIONS, &value) {
                    Produced::Acked(p, o) => {
                        acked.insert((p, o), value.clone());
                        Some(i)
                    }
                    _ => None,
                }
            })
        });
        for _ in 0..10 {
            next += 1;
            let value = format!("r{round}-{next}");
            if let Produced::Acked(p, o) = produce(&nodes[master], next % PARTITIONS, &value) {
                acked.insert((p, o), value);
            }
        }
        nodes[master].kill_9();
        let killed = Instant::now();
        let survivors: Vec<usize> = (0..3).filter(|&i| i != master).collect();
        wait_for("a new master", || {
            next += 1;
            let value = format!("r{round}-{next}");
            survivors
                .iter()
                .find_map(|&i| match produce(&nodes[i], next % PARTITIONS, &value) {
                    Produced::Acked(p, o) => {
                        acked.insert((p, o), value.clone());
                        Some(())
                    }
                    _ => None,
                })
        });
        times.push(killed.elapsed());
        nodes[master].start_again();
    }
    times.sort();
    eprintln!(
        "{FAILOVERS} failovers: kill -9 to the first acknowledged write p50 {:?}, max {:?}",
        times[FAILOVERS / 2],
        times[FAILOVERS - 1]
    );
    let mut probe = 0;
    let (master, _) = wait_for("a master", || {
        find_master(&nodes.iter().collect::<Vec<_>>(), &mut probe)
    });
    for i in 0..3 {
        wait_for("every node in step", || {
            same_records(&nodes[i], &nodes[master]).then_some(())
        });
        check_acknowledged(&nodes[i], &acked, &format!("node {}", i + 1));
    }
}

/// confluent-kafka (librdkafka) across a failover: an idempotent acks=all
/// producer and a consumer group, bootstrapped from all three nodes, go
/// on by themselves when the master is killed; every value reported
/// delivered is in the log once at its offset and reached the group
/// (`clients/python/cluster_failover.py`).
#[test]
fn confluent_kafka_producer_and_group_go_on_across_a_failover() {
    let etcd = Etcd::start();
    let mut nodes = start_three(&etcd);
    let mut probe = 0;
    let (master, _) = wait_for("a master", || {
        find_master(&nodes.iter().collect::<Vec<_>>(), &mut probe)
    });
    let bootstrap: Vec<String> = nodes
        .iter()
        .map(|n| n.kafka_addr.unwrap().to_string())
        .collect();
    let mut command = tidelog_integration_tests::clients::python_command("cluster_failover.py");
    command.arg(nodes[master].url()).arg(bootstrap.join(","));
    let script =
        std::thread::spawn(move || tidelog_integration_tests::clients::run_script(command));
    // Mid-stream: the producer paces its 600 values over about 12 s.
    std::thread::sleep(Duration::from_secs(4));
    nodes[master].kill_9();
    let stdout = script.join().unwrap();
    assert!(
        stdout.contains("cluster_failover: 600 delivered across the failover"),
        "{stdout}"
    );
}

/// A node's `tls:`, `security:` and `http:` for [`tls_cluster`]: its own
/// certificate, the cluster's CA for clients and nodes alike (client
/// certificates optional for clients, so Basic logins work too), logins
/// and ACLs on, `admin` and the three nodes' certificates super users.
fn tls_sections(pki: &TestPki, node_id: u32) -> String {
    let (cert, key) = pki.node(&format!("node{node_id}"));
    let password_file = pki.path("admin.password");
    std::fs::write(&password_file, "admin-secret\n").unwrap();
    format!(
        "http:\n  tls: true\nkafka:\n  listen: null\ntls:\n  cert_file: {}\n  key_file: {}\n  client_ca_file: {}\n  client_auth: optional\n  handshake_timeout_ms: 2000\nsecurity:\n  authentication: true\n  authorization: true\n  super_users: [admin, node1, node2, node3]\n  users:\n    - name: admin\n      password_file: {}\n",
        cert.display(),
        key.display(),
        pki.path("ca.crt").display(),
        password_file.display()
    )
}

/// What a TLS client of `replication` gets: `Ok(bytes read until the
/// node closed)` once the handshake finished (with the certificate
/// `cert`/`key`, trusting `ca`), `Err(why)` when it did not. Python's
/// `ssl` module, as an operator's probe would be.
fn replication_probe(
    replication: SocketAddr,
    ca: &std::path::Path,
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<Vec<u8>, String> {
    let script = r#"
import socket, ssl, sys
host, port, ca, cert, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context(cafile=ca)
ctx.load_cert_chain(cert, key)
try:
    with socket.create_connection((host, port), timeout=20) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as tls:
            got = b""
            while True:
                chunk = tls.recv(4096)
                if not chunk:
                    break
                got += chunk
except (ssl.SSLError, ConnectionError, OSError) as e:
    if "got" in dir() and got:
        sys.stdout.buffer.write(got)
        sys.exit(0)
    print("refused:", e, file=sys.stderr)
    sys.exit(3)
sys.stdout.buffer.write(got)
"#;
    let output = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(replication.ip().to_string())
        .arg(replication.port().to_string())
        .args([ca, cert, key])
        .output()
        .expect("run python3");
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// Every record of partition `p` that `node` serves over HTTPS to
/// `client` (curl arguments): offset → value; `None` while it does not.
fn served_https(node: &TidelogProcess, client: &[String], p: u64) -> Option<BTreeMap<u64, String>> {
    let path = format!("/topics/t/partitions/{p}/records?offset=0&timeout=0");
    let (status, body) = curl_https(node.addr, client, "GET", &path, None);
    if status != 200 {
        return None;
    }
    let records: Value = serde_json::from_str(&body).ok()?;
    Some(
        records
            .as_array()?
            .iter()
            .map(|r| {
                (
                    r["offset"].as_u64().unwrap(),
                    r["value"].as_str().unwrap().to_string(),
                )
            })
            .collect(),
    )
}

/// A cluster with `tls` (docs/CLUSTER.md "Security"): the nodes replicate
/// over TLS with their own certificates; a replica forwards a write over
/// HTTPS keeping its caller's principal (a client certificate's CN,
/// never the node's own); a client's own forwarding headers are not
/// believed; the replication listener refuses a certificate that names
/// no node, and one another CA signed never finishes its handshake.
#[test]
fn with_tls_nodes_prove_who_they_are_and_a_forwarded_write_keeps_its_caller() {
    let etcd = Etcd::start();
    let endpoint = etcd.endpoint();
    let pki = TestPki::new();
    let arg = |p: &std::path::Path| p.display().to_string();
    let ca = vec!["--cacert".to_string(), arg(&pki.path("ca.crt"))];
    let with_cert = |(cert, key): &(std::path::PathBuf, std::path::PathBuf)| {
        let mut args = ca.clone();
        args.extend(["--cert".into(), arg(cert), "--key".into(), arg(key)]);
        args
    };
    let alice_files = pki.client("alice");
    let mallory_files = pki.client("mallory");
    let (alice, mallory) = (with_cert(&alice_files), with_cert(&mallory_files));
    let mut admin = ca.clone();
    admin.extend(["-u".into(), "admin:admin-secret".into()]);

    let mut replication = Vec::new();
    let nodes: Vec<TidelogProcess> = (1..=3)
        .map(|id| {
            let listen = loop {
                let addr = free_local_addr();
                if !replication.contains(&addr) {
                    break addr;
                }
            };
            replication.push(listen);
            let yaml = format!(
                "{}{}",
                config(&endpoint, id, listen),
                tls_sections(&pki, id)
            );
            TidelogProcess::start_with_own_listeners(&yaml, Some(ca.clone()))
        })
        .collect();

    // The master: the node that takes a write it is told not to forward.
    let record = |value: &str| json!({"records": [{"value": value, "partition": 0}]}).to_string();
    let mut not_forwarded = admin.clone();
    not_forwarded.extend(["-H".into(), "x-tidelog-forwarded-by: 0".into()]);
    let master = wait_for("a master over HTTPS", || {
        nodes.iter().position(|n| {
            curl_https(
                n.addr,
                &not_forwarded,
                "POST",
                "/topics/t",
                Some(&record("probe")),
            )
            .0 == 200
        })
    });
    let replica = &nodes[(master + 1) % 3];
    let acl = json!({
        "resource_type": "TOPIC", "resource_name": "t", "pattern_type": "LITERAL",
        "principal": "User:alice", "host": "*", "operation": "WRITE", "permission": "ALLOW",
    });
    let (status, body) = curl_https(
        nodes[master].addr,
        &admin,
        "POST",
        "/v3/clusters/tidelog/acls",
        Some(&acl.to_string()),
    );
    assert_eq!(status, 201, "{body}");

    // alice, known by her certificate at the replica: forwarded over
    // HTTPS with the replica's certificate, allowed as alice.
    let (status, body) = curl_https(
        replica.addr,
        &alice,
        "POST",
        "/topics/t",
        Some(&record("alice")),
    );
    assert_eq!(status, 200, "alice's write through a replica: {body}");
    // mallory has no ACL: the master judges mallory, not the node that
    // forwarded (a super user), even when mallory names alice herself.
    let mut spoofing = mallory.clone();
    spoofing.extend(["-H".into(), "x-tidelog-forwarded-principal: alice".into()]);
    for (who, args) in [("mallory", &mallory), ("mallory naming alice", &spoofing)] {
        let (status, body) = curl_https(
            replica.addr,
            args,
            "POST",
            "/topics/t",
            Some(&record("mallory")),
        );
        assert_eq!(status, 403, "{who} through a replica: {body}");
        assert!(body.contains("40301"), "{who}: {body}");
    }
    // Sent to the master as if a node had forwarded it: mallory's
    // certificate names no node, so the headers count for nothing.
    let mut posing = spoofing.clone();
    posing.extend(["-H".into(), "x-tidelog-forwarded-by: 2".into()]);
    let (status, body) = curl_https(
        nodes[master].addr,
        &posing,
        "POST",
        "/topics/t",
        Some(&record("mallory")),
    );
    assert_eq!(status, 403, "mallory posing as a node: {body}");
    // Nobody at all: the replica asks for a login.
    let (status, _) = curl_https(
        replica.addr,
        &ca,
        "POST",
        "/topics/t",
        Some(&record("anon")),
    );
    assert_eq!(status, 401);

    // Replication ran over TLS: every node serves the same records, and
    // none of mallory's.
    let all = wait_for("every node to serve the same records", || {
        let first = served_https(&nodes[0], &admin, 0)?;
        let same = nodes[1..]
            .iter()
            .all(|n| served_https(n, &admin, 0).as_ref() == Some(&first));
        (same && first.values().any(|v| v == "alice")).then_some(first)
    });
    assert!(
        !all.values().any(|v| v == "mallory" || v == "anon"),
        "{all:?}"
    );

    // The replication listener: alice's certificate is the cluster CA's
    // but names no node: refused (REFUSED, not authorized) and logged.
    let (alice_cert, alice_key) = &alice_files;
    let refused = replication_probe(
        replication[master],
        &pki.path("ca.crt"),
        alice_cert,
        alice_key,
    )
    .expect("the handshake finishes for a certificate of the cluster's CA");
    let text = String::from_utf8_lossy(&refused);
    assert!(
        text.contains("User:alice may not CLUSTER_ACTION"),
        "{text:?}"
    );
    assert!(
        nodes[master]
            .log()
            .contains("replication connection refused"),
        "the master logs the refusal"
    );
    // A certificate another CA signed never finishes the handshake.
    let stranger = TestPki::new();
    let (cert, key) = stranger.node("node2");
    let e = replication_probe(replication[master], &pki.path("ca.crt"), &cert, &key)
        .expect_err("a stranger's handshake is refused");
    assert!(e.contains("refused"), "{e}");
    // ... and counted on the replication listener's own family.
    let (status, metrics) = curl_https(nodes[master].addr, &ca, "GET", "/metrics", None);
    assert_eq!(status, 200);
    let failed = metrics
        .lines()
        .find_map(|l| l.strip_prefix("tidelog_replication_tls_handshakes_failed_total "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(failed.is_some_and(|n| n >= 1), "{failed:?}");
    // And the cluster still replicates.
    let (status, body) = curl_https(
        replica.addr,
        &alice,
        "POST",
        "/topics/t",
        Some(&record("after")),
    );
    assert_eq!(status, 200, "{body}");
    wait_for("the last record everywhere", || {
        nodes
            .iter()
            .all(|n| served_https(n, &admin, 0).is_some_and(|r| r.values().any(|v| v == "after")))
            .then_some(())
    });

    // A rotated node certificate reaches forwarding without a restart.
    // The replica's new one names `rotated`, no super user: once it is
    // taken, the master no longer believes the replica's word for its
    // caller, so alice's write through it is the replica's own, which
    // may not write.
    let replica_id = (master + 1) % 3 + 1;
    pki.node_in(&format!("node{replica_id}"), "rotated");
    wait_for("the rotated certificate in forwarding", || {
        let (status, _) = curl_https(
            replica.addr,
            &alice,
            "POST",
            "/topics/t",
            Some(&record("rotating")),
        );
        (status == 403).then_some(())
    });
}
