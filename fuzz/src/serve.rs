//! AFL++ driver: a storage server's lock and data services (see `atomio_fuzz::serve`).
fn main() {
    afl::fuzz!(|data: &[u8]| atomio_fuzz::serve(data));
}
