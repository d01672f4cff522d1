//! `default_path` reads the environment; alone in this test binary, so no other thread reads
//! the environment while it is changed.

use std::path::PathBuf;
use wanperf_archive::default_path;

#[test]
fn default_path_follows_the_environment() {
    let saved: Vec<_> = ["WANPERF_DB", "XDG_DATA_HOME", "HOME"].map(|k| (k, std::env::var_os(k))).into();
    std::env::set_var("WANPERF_DB", "/x/y.sqlite");
    assert_eq!(default_path(), PathBuf::from("/x/y.sqlite"));
    std::env::remove_var("WANPERF_DB");
    std::env::set_var("XDG_DATA_HOME", "/data");
    assert_eq!(default_path(), PathBuf::from("/data/wanperf/archive.sqlite"));
    std::env::remove_var("XDG_DATA_HOME");
    std::env::set_var("HOME", "/home/u");
    assert_eq!(default_path(), PathBuf::from("/home/u/.local/share/wanperf/archive.sqlite"));
    for (k, v) in saved {
        match v {
            Some(v) => std::env::set_var(k, v),
            None => std::env::remove_var(k),
        }
    }
}
