use super::*;
use atomio_proto::{FileId, Request};

fn frame(client: u64, request: Request) -> Event {
    Event::Frame {
        client: ClientId(client),
        tag: 0,
        request,
    }
}

fn write(client: u64) -> Event {
    frame(client, Request::Sync { file: FileId(1) })
}

fn list(client: u64) -> Event {
    frame(client, Request::VersionList { file: FileId(1) })
}

#[test]
fn quick_requests_pass_other_clients_bulk_but_never_their_own() {
    let q = |v: Vec<Event>| next_to_serve(&v.into_iter().collect());
    // A reader's lookup behind two writers' bulk requests goes first.
    assert_eq!(q(vec![write(1), write(2), list(3)]), 2);
    // Behind its own bulk request it waits its turn.
    assert_eq!(q(vec![write(1), write(3), list(3)]), 0);
    // Behind its own connection event too.
    assert_eq!(
        q(vec![
            write(1),
            Event::Disconnected {
                client: ClientId(3)
            },
            list(3)
        ]),
        0
    );
    // Nothing quick: the oldest.
    assert_eq!(q(vec![write(1), write(2)]), 0);
    assert_eq!(q(vec![list(4), write(1)]), 0);
}
