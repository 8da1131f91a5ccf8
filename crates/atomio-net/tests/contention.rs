//! Under contention a client's lock operations open with a wait (`atomio_lock::Contention`):
//! after a try has failed on a file, a contended cycle there sends no more messages than a
//! free one, and once the contention has passed the client tries first again.

use atomio_layout::{Access, Layout, Pattern};
use atomio_lock::{Method, OpStats, Protocol};
use atomio_net::{ClusterClient, EmbeddedCluster};
use atomio_proto::{FileId, LockMode};
use std::time::Duration;

const FILE: FileId = FileId(42);
const SERVERS: u32 = 4;

/// 16 one-byte locks 64 bytes apart: four at each of the four servers; and `a`'s four
/// among them at server 0, the first server in order (where a waiter queues). `a` holds
/// nothing elsewhere, so whether `b`'s try after its wait succeeds does not depend on how
/// soon the other servers take in `a`'s releases (a race of the real protocol, which then
/// falls back to waiting in order).
fn setup() -> (Layout, Access, Access) {
    let layout = Layout::round_robin(64, SERVERS, SERVERS, 0).expect("layout");
    let one = Pattern::bytes(1).expect("pattern");
    let access =
        Access::new(0, Pattern::hvector(16, 1, 64, &one).expect("pattern")).expect("access");
    let at_first =
        Access::new(0, Pattern::hvector(4, 1, 256, &one).expect("pattern")).expect("access");
    (layout, access, at_first)
}

async fn cycle(c: &mut ClusterClient, layout: &Layout, access: &Access) -> OpStats {
    let held = c
        .lock(
            FILE,
            LockMode::Write,
            access,
            layout,
            Method::Datatype,
            Protocol::OneTry,
        )
        .await
        .expect("lock");
    c.unlock(held).await.expect("unlock")
}

/// `b` takes the locks while `a` holds `a_access` (some of them): `a` lets go only once
/// `b` has had time to be refused and to wait.
async fn contended_cycle(
    a: &mut ClusterClient,
    a_access: &Access,
    b: ClusterClient,
    layout: &Layout,
    access: &Access,
) -> (ClusterClient, OpStats) {
    let held = a
        .lock(
            FILE,
            LockMode::Write,
            a_access,
            layout,
            Method::Datatype,
            Protocol::OneTry,
        )
        .await
        .expect("a locks");
    let (l, acc) = (layout.clone(), access.clone());
    let waiter = tokio::spawn(async move {
        let mut b = b;
        let stats = cycle(&mut b, &l, &acc).await;
        (b, stats)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "b got locks a holds");
    a.unlock(held).await.expect("a unlocks");
    waiter.await.expect("b's task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failed_try_contended_cycles_cost_what_free_ones_do() {
    let cluster = EmbeddedCluster::start(SERVERS);
    let mut a = cluster.connect().await.expect("a");
    let b = cluster.connect().await.expect("b");
    let (layout, access, at_first) = setup();

    // A free cycle: one try at every server, then the releases.
    let mut b = b;
    let free = cycle(&mut b, &layout, &access).await;
    assert_eq!((free.optimistic_rounds, free.two_phase_rounds), (1, 0));
    assert_eq!(free.messages, 2 * SERVERS as u64);

    // The first contended cycle tries, is refused, and waits: more messages.
    let (b, first) = contended_cycle(&mut a, &at_first, b, &layout, &access).await;
    assert_eq!(first.optimistic_rounds, 1, "{first:?}");
    assert!(first.two_phase_rounds >= 1, "{first:?}");
    assert!(first.messages > free.messages, "{first:?} vs {free:?}");

    // Now b opens with a wait: contended, it costs what a free cycle costs.
    let (mut b, waited) = contended_cycle(&mut a, &at_first, b, &layout, &access).await;
    assert_eq!(
        (
            waited.two_phase_rounds,
            waited.optimistic_rounds,
            waited.truncations
        ),
        (1, 1, 0),
        "{waited:?}"
    );
    assert_eq!(waited.messages, free.messages, "{waited:?}");

    // Free cycles count the wait-first operations down; then b tries first again.
    let mut opened_with_wait = 0;
    loop {
        let s = cycle(&mut b, &layout, &access).await;
        assert_eq!(s.messages, free.messages, "{s:?}");
        if s.two_phase_rounds == 0 {
            break;
        }
        opened_with_wait += 1;
        assert!(
            opened_with_wait <= atomio_lock::protocol::WAIT_FIRST_OPS,
            "never tried again"
        );
    }
    // The contended cycle above was one of the WAIT_FIRST_OPS.
    assert_eq!(opened_with_wait, atomio_lock::protocol::WAIT_FIRST_OPS - 1);
}
