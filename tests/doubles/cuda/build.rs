//! The double is never unloaded (`-z nodelete`): its stream threads and its exit check run
//! its code after a caller may have closed its handle to the library.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    }
}
