use super::*;
use crate::service::Service;
use atomio_proto::{FileId, ObjPiece, Striping};
use std::time::Duration;

/// A data service that stops on its first request until the test lets it go.
struct Stuck(std::sync::mpsc::Receiver<()>);

impl Service for Stuck {
    fn handle(&mut self, _: ClientId, _: u64, _: Request, _: &mut Vec<Outgoing>) {
        let _ = self.0.recv_timeout(Duration::from_secs(30));
    }
    fn disconnect(&mut self, _: ClientId, _: &mut Vec<Outgoing>) {}
}

fn write(i: u64) -> Request {
    Request::Write {
        file: FileId(1),
        object: 0,
        striping: Striping {
            stripe_size: 1 << 16,
            objects: 1,
        },
        pieces: vec![ObjPiece { offset: i, len: 1 }],
        data: atomio_proto::data::Bytes::from(vec![1u8]),
    }
}

/// With the data actor stuck and its inbox full of one client's admitted writes, the
/// lock actor still answers another client's ping at once: the writer's sends wait
/// for places in the data inbox, the lock actor never does (it waited in `data.send`
/// before, and every lock client with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_data_inbox_pushes_back_on_the_writer_not_on_locks() {
    let (go, stuck) = std::sync::mpsc::channel();
    let server = spawn_split(atomio_lock::LockServer::new(), Stuck(stuck)).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let connect = |s: &ServerHandle, n| {
        let client = s.new_client_id();
        let ev = Event::Connected {
            client,
            sink: ReplySink::InProcess(tx.clone(), ServerId(n)),
            queued: Arc::new(AtomicUsize::new(0)),
        };
        (client, ev)
    };
    let (writer, ev) = connect(&server, 0);
    server.send(ev).await.unwrap();
    let (pinger, ev) = connect(&server, 1);
    server.send(ev).await.unwrap();
    let s = server.clone();
    let writing = tokio::spawn(async move {
        for i in 0..(INBOX_CAPACITY as u64 + 1000) {
            let ev = Event::Frame {
                client: writer,
                tag: i,
                request: write(i),
            };
            if s.send(ev).await.is_err() {
                return;
            }
        }
    });
    // Let the writer fill the data inbox (its last sends wait for places).
    let filled = tokio::time::Instant::now() + Duration::from_secs(10);
    while server.data.as_ref().unwrap().capacity() > 0 && tokio::time::Instant::now() < filled {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.data.as_ref().unwrap().capacity(), 0, "filled");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let ping = Event::Frame {
        client: pinger,
        tag: 7,
        request: Request::Ping { nonce: 7 },
    };
    let answered = tokio::time::timeout(Duration::from_secs(2), async {
        server.send(ping).await.unwrap();
        loop {
            match rx.recv().await {
                Some(ClientEvent::Frame(ServerId(1), f)) if f.tag == 7 => return f.reply,
                Some(_) => {}
                None => panic!("no replies"),
            }
        }
    })
    .await;
    assert_eq!(
        answered.expect("the ping waited for the data actor"),
        Reply::Pong { nonce: 7 }
    );
    drop(go);
    writing.abort();
}
