//! The watermark and the in-sync rule, with instants given, not slept.

use super::*;

const LAG: Duration = Duration::from_secs(10);

fn set(ids: &[u32]) -> BTreeSet<u32> {
    ids.iter().copied().collect()
}

#[test]
fn the_watermark_is_the_lowest_member_and_never_goes_down() {
    let p = Progress::new(1, set(&[1, 2, 3]), 100, LAG);
    assert_eq!(
        p.watermark(),
        Watermark {
            high_watermark: 0,
            insync: 3
        }
    );
    p.confirmed(2, 80);
    assert_eq!(p.watermark().high_watermark, 0, "3 confirmed nothing");
    p.confirmed(3, 90);
    assert_eq!(p.watermark().high_watermark, 80);
    p.confirmed(2, 150);
    assert_eq!(p.watermark().high_watermark, 90);
    p.confirmed(3, 200);
    assert_eq!(
        p.watermark().high_watermark,
        100,
        "never past the master's own end"
    );
    p.master_durable(300);
    assert_eq!(p.watermark().high_watermark, 150);
    p.confirmed(2, 10);
    assert_eq!(
        p.watermark().high_watermark,
        150,
        "a lower confirmation is ignored"
    );
    // A replica outside the set holds nothing back.
    p.confirmed(4, 0);
    assert_eq!(p.watermark().high_watermark, 150);
    // A member leaving can only raise it.
    p.set_insync(set(&[1, 3]));
    assert_eq!(
        p.watermark(),
        Watermark {
            high_watermark: 200,
            insync: 2
        }
    );
}

#[test]
fn a_replica_that_keeps_up_under_load_stays_and_one_that_stops_leaves() {
    let p = Progress::new(1, set(&[1, 2, 3]), 0, LAG);
    let t0 = Instant::now();
    // The master writes 1000 bytes a second; 2 confirms every second what
    // the master had half a second before (always behind), 3 stops at 5 s.
    for second in 1..=60u64 {
        let now = t0 + Duration::from_secs(second);
        let end = second * 1000;
        p.master_durable(end);
        p.confirmed_at(2, end - 500, now);
        if second <= 5 {
            p.confirmed_at(3, end - 500, now);
        }
        let want = p.wanted_insync_at(now);
        // 3 last reached, at 5 s, where the master was at 4 s: caught up
        // at 4 s, so within the bound through 14 s.
        if second <= 14 {
            assert_eq!(want, None, "second {second}: nobody leaves yet");
        } else {
            assert_eq!(want, Some(set(&[1, 2])), "second {second}: 3 left, 2 stays");
        }
    }
    p.set_insync(set(&[1, 2]));
    assert_eq!(p.watermark().high_watermark, 59_500, "2 holds it now");
    assert_eq!(p.wanted_insync_at(t0 + Duration::from_secs(60)), None);

    // 3 comes back and catches up: once it holds the watermark it joins.
    let now = t0 + Duration::from_secs(61);
    p.connected(3);
    p.confirmed_at(3, 30_000, now);
    assert_eq!(p.wanted_insync_at(now), None, "still below the watermark");
    p.confirmed_at(3, 60_000, now);
    assert_eq!(p.wanted_insync_at(now), Some(set(&[1, 2, 3])));
}

#[test]
fn an_idle_replica_that_holds_everything_stays_in_sync() {
    let p = Progress::new(1, set(&[1, 2]), 500, LAG);
    p.confirmed(2, 500);
    let much_later = Instant::now() + 100 * LAG;
    assert_eq!(p.wanted_insync_at(much_later), None);
    // Never heard from and never caught up: gone after the bound.
    let q = Progress::new(1, set(&[1, 2]), 500, LAG);
    assert_eq!(q.wanted_insync_at(much_later), Some(set(&[1])));
}

#[tokio::test]
async fn an_acknowledgement_waits_for_the_watermark_and_enough_members() {
    let p = std::sync::Arc::new(Progress::new(1, set(&[1, 2]), 0, LAG));
    let waiter = {
        let p = std::sync::Arc::clone(&p);
        tokio::spawn(async move { p.wait_replicated(100, 2, Duration::from_secs(30)).await })
    };
    p.master_durable(100);
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished(), "2 has not confirmed");
    p.confirmed(2, 100);
    assert!(waiter.await.unwrap());
    // Covered, but too few in sync: refused once the time is up.
    p.set_insync(set(&[1]));
    assert!(!p.wait_replicated(100, 2, Duration::from_millis(20)).await);
    assert!(p.wait_replicated(100, 1, Duration::from_millis(20)).await);
}
