//! A lost ConsumeQueue file, against the real binary: after a clean stop
//! and after `kill -9`, a partition's queue files are deleted; the restart
//! warns, rebuilds the queue from the CommitLog, serves every record at its
//! offset, and the next produce gets the next offset, not 0 again
//! (docs/recovery.md, step 5).
#![allow(clippy::unwrap_used)]

mod common;

use common::TidelogProcess;
use serde_json::{json, Value};

const CONFIG: &str = "
topics:
  - name: t
    partitions: 1
";

/// Records produced before the loss (the run lost 313).
const N: u64 = 313;

fn produce(s: &TidelogProcess, from: u64, to: u64) -> Vec<u64> {
    let records: Vec<Value> = (from..to)
        .map(|o| json!({"value": format!("v{o}-{}", "x".repeat(200))}))
        .collect();
    let answer = s
        .send_json(
            "POST",
            "/topics/t/partitions/0",
            &json!({"records": records}),
        )
        .expect(200);
    answer["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["offset"].as_u64().unwrap())
        .collect()
}

/// Every record's (offset, value prefix) from 0 on.
fn fetch_all(s: &TidelogProcess) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    loop {
        let next = out.len() as u64;
        let got = s
            .get_with(
                &format!("/topics/t/partitions/0/records?offset={next}&timeout=0"),
                &[("Accept", "application/vnd.kafka.v2+json")],
            )
            .expect(200);
        let got = got.as_array().unwrap().clone();
        if got.is_empty() {
            return out;
        }
        for r in got {
            let v = r["value"].as_str().unwrap();
            let prefix = v.split('-').next().unwrap().to_string();
            out.push((r["offset"].as_u64().unwrap(), prefix));
        }
    }
}

fn end_offset(s: &TidelogProcess) -> u64 {
    s.get("/topics/t/partitions/0/offsets").expect(200)["end_offset"]
        .as_u64()
        .unwrap()
}

fn delete_queue_files(s: &TidelogProcess) -> usize {
    let dir = s.data_dir.path().join("consumequeue").join("t").join("0");
    let mut deleted = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name.bytes().all(|b| b.is_ascii_digit()) {
            std::fs::remove_file(&path).unwrap();
            deleted += 1;
        }
    }
    deleted
}

#[test]
fn a_deleted_queue_file_is_rebuilt_and_offsets_continue() {
    for clean in [true, false] {
        let mut s = TidelogProcess::start_with_config(&format!(
            "{}{CONFIG}",
            common::SMALL_SEGMENTS_MANUAL_RETENTION
        ));
        let mut next = 0;
        while next < N {
            let to = (next + 50).min(N);
            assert_eq!(produce(&s, next, to), (next..to).collect::<Vec<_>>());
            next = to;
        }
        assert_eq!(end_offset(&s), N);
        if clean {
            assert!(s.terminate().success());
        } else {
            // A periodic checkpoint (every 50 ms here) records the
            // queue's end before the crash; the scan after it finds the
            // rest either way.
            std::thread::sleep(std::time::Duration::from_millis(500));
            s.kill_9();
        }
        assert!(delete_queue_files(&s) >= 1);
        let before = s.log_len();
        s.start_again();
        let log = s.log()[before..].to_string();
        assert!(
            log.contains("consume queue file missing or shorter than the last checkpoint recorded"),
            "clean: {clean}\n{log}"
        );
        assert!(log.contains("rebuilt the consume queue"), "{log}");
        assert_eq!(end_offset(&s), N, "clean: {clean}");
        let served = fetch_all(&s);
        let want: Vec<(u64, String)> = (0..N).map(|o| (o, format!("v{o}"))).collect();
        assert_eq!(served, want, "clean: {clean}");
        assert_eq!(produce(&s, N, N + 1), vec![N], "clean: {clean}");
    }
}
