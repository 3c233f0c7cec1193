//! The kernel cache across processes: four processes storing and reading one kernel's
//! entry at once each always read a whole entry, and the environment's `off` and folder
//! choices hold, and an entry of every image kind reads back as that kind. Each child is
//! this test binary run again with `KERNEL_CACHE_CHILD` set.

use std::path::PathBuf;
use std::process::Command;

use gpuport_vendor_kit::compile::{key, Compiled, DiskCache, ImageKind, CACHE_ENV, DEFAULT_MAX_BYTES};

const CHILD: &str = "KERNEL_CACHE_CHILD";

fn compiled() -> Compiled {
    // Large enough that a write takes more than one system call.
    let image: Vec<u8> = (0..512 * 1024).map(|i| (i % 251) as u8).collect();
    Compiled { image, kind: ImageKind::Cubin, lowered: vec![("k<int>".into(), "_Z1kIiEvv".into())] }
}

fn rerun(test: &str, env: &[(&str, &str)]) -> std::process::Child {
    rerun_without(test, env, &[])
}

/// [`rerun`] with the variables `unset` removed from the child's environment.
fn rerun_without(test: &str, env: &[(&str, &str)], unset: &[&str]) -> std::process::Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"]);
    for k in unset {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

#[test]
#[cfg_attr(miri, ignore)]
fn four_processes_compiling_one_kernel_each_read_whole_entries() {
    let k = key(&[b"one kernel"]);
    if let Ok(dir) = std::env::var(CHILD) {
        let cache = DiskCache::new(dir, DEFAULT_MAX_BYTES);
        let want = compiled();
        for _ in 0..40 {
            if let Some(got) = cache.get(&k) {
                assert_eq!(got, want, "a partial or foreign entry was read");
            }
            cache.put(&k, &want);
            assert_eq!(cache.get(&k).as_ref(), Some(&want));
        }
        return;
    }
    let dir = std::env::temp_dir().join(format!("gpuport-kcache-procs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_text = dir.to_string_lossy().into_owned();
    let children: Vec<_> = (0..4)
        .map(|_| rerun("four_processes_compiling_one_kernel_each_read_whole_entries", &[(CHILD, &dir_text)]))
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a process read a damaged entry");
    }
    let left: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(left.len(), 1, "one entry, no temporary files left: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[cfg_attr(miri, ignore)]
fn the_environment_chooses_the_folder_or_turns_the_cache_off() {
    if let Ok(mode) = std::env::var(CHILD) {
        match mode.as_str() {
            "off" => assert!(DiskCache::from_env().is_none()),
            dir => assert_eq!(DiskCache::from_env().unwrap().dir(), std::path::Path::new(dir)),
        }
        return;
    }
    let test = "the_environment_chooses_the_folder_or_turns_the_cache_off";
    let dir = std::env::temp_dir().join("gpuport-kcache-chosen");
    let dir = dir.to_string_lossy().into_owned();
    for (mode, value) in [("off", "off"), (dir.as_str(), dir.as_str())] {
        let status = rerun(test, &[(CHILD, mode), (CACHE_ENV, value)]).wait().unwrap();
        assert!(status.success(), "{CACHE_ENV}={value}");
    }
    // Without the variable (or with it empty): `$XDG_CACHE_HOME/gpuport/kernels`, else, with
    // that unset or empty, `~/.cache/gpuport/kernels`.
    let xdg = std::env::temp_dir().join("gpuport-kcache-xdg").to_string_lossy().into_owned();
    let home = std::env::temp_dir().join("gpuport-kcache-home").to_string_lossy().into_owned();
    let in_xdg = format!("{xdg}/gpuport/kernels");
    let in_home = format!("{home}/.cache/gpuport/kernels");
    // (variables set, variables removed, the folder the child must see)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], &'a str);
    let cases: [Case<'_>; 4] = [
        (&[("XDG_CACHE_HOME", &xdg)], &[CACHE_ENV], &in_xdg),
        (&[(CACHE_ENV, ""), ("XDG_CACHE_HOME", &xdg)], &[], &in_xdg),
        (&[("XDG_CACHE_HOME", ""), ("HOME", &home)], &[CACHE_ENV], &in_home),
        (&[("HOME", &home)], &[CACHE_ENV, "XDG_CACHE_HOME"], &in_home),
    ];
    for (env, unset, want) in cases {
        let env: Vec<(&str, &str)> = std::iter::once((CHILD, want)).chain(env.iter().copied()).collect();
        let status = rerun_without(test, &env, unset).wait().unwrap();
        assert!(status.success(), "{env:?} without {unset:?} should choose {want}");
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn an_entry_of_every_image_kind_reads_back_as_that_kind() {
    let dir = std::env::temp_dir().join(format!("gpuport-kcache-kinds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = DiskCache::new(&dir, DEFAULT_MAX_BYTES);
    for kind in [ImageKind::Ptx, ImageKind::Cubin, ImageKind::HipCodeObject] {
        let k = key(&[format!("{kind:?}").as_bytes()]);
        let entry = Compiled { image: b"an image".to_vec(), kind, lowered: Vec::new() };
        cache.put(&k, &entry);
        assert_eq!(cache.get(&k), Some(entry), "{kind:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
