//! AFL++ driver: the frame decoder (see `atomio_fuzz::decode`).
fn main() {
    afl::fuzz!(|data: &[u8]| atomio_fuzz::decode(data));
}
