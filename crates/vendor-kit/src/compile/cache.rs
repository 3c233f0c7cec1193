//! The kernel cache on disk: one file per compiled image, named by the SHA-256 of
//! everything that decides the image (gpuport's version, the compiler and its version, the
//! target, the arguments, the source, its headers, the name expressions, the portability
//! header). Where: `GPUPORT_KERNEL_CACHE` (`off` disables it), else
//! `$XDG_CACHE_HOME/gpuport/kernels`, else `~/.cache/gpuport/kernels`.
//!
//! - Written atomically: a temporary file in the same folder, renamed over the entry, so a
//!   reader sees a whole entry or none; several processes compiling one kernel each write
//!   a whole entry and the last rename wins.
//! - Checked on read: an entry ends with the SHA-256 of everything before it; a truncated
//!   or corrupted one (or one of another format) is removed and the kernel recompiled,
//!   never loaded.
//! - Bounded: after a write, the oldest entries (by modification time, which a hit
//!   refreshes) are removed until the folder holds at most `GPUPORT_KERNEL_CACHE_MAX_BYTES`
//!   (default 256 MiB).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::{Compiled, ImageKind};

/// The variable naming the cache folder, or `off`.
pub const CACHE_ENV: &str = "GPUPORT_KERNEL_CACHE";
/// The variable bounding the cache's size in bytes.
pub const CACHE_MAX_ENV: &str = "GPUPORT_KERNEL_CACHE_MAX_BYTES";
/// The default bound.
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;

const MAGIC: &[u8; 8] = b"GPUPORTK";
const FORMAT: u32 = 1;
const DIGEST: usize = 32;

/// A cache folder and its bound.
#[derive(Debug, Clone)]
pub struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
}

impl DiskCache {
    /// The cache the environment names; `None` when it is `off` or no folder can be named.
    pub fn from_env() -> Option<DiskCache> {
        let max_bytes =
            std::env::var(CACHE_MAX_ENV).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(DEFAULT_MAX_BYTES);
        let dir = match std::env::var_os(CACHE_ENV).filter(|v| !v.is_empty()) {
            Some(v) if v == "off" => return None,
            Some(v) => PathBuf::from(v),
            None => std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
                .join("gpuport/kernels"),
        };
        Some(DiskCache { dir, max_bytes })
    }

    /// A cache in `dir`, holding at most `max_bytes`.
    pub fn new(dir: impl Into<PathBuf>, max_bytes: u64) -> DiskCache {
        DiskCache { dir: dir.into(), max_bytes }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn entry(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.kernel"))
    }

    /// The entry for `key`, if there is a whole, uncorrupted one; a damaged one is removed.
    pub fn get(&self, key: &str) -> Option<Compiled> {
        let path = self.entry(key);
        let bytes = fs::read(&path).ok()?;
        match decode(&bytes) {
            Some(compiled) => {
                // A hit makes the entry the newest, for eviction.
                if let Ok(file) = fs::File::options().append(true).open(&path) {
                    let _ = file.set_modified(SystemTime::now());
                }
                Some(compiled)
            }
            None => {
                log::warn!("removing the damaged kernel cache entry {}", path.display());
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores `compiled` under `key` (atomically), then evicts the oldest entries beyond
    /// the bound. A cache that cannot be written is only logged: compiling works without it.
    pub fn put(&self, key: &str, compiled: &Compiled) {
        if let Err(e) = self.write(key, compiled) {
            log::warn!("the kernel cache in {} could not be written: {e}", self.dir.display());
            return;
        }
        self.evict(&self.entry(key));
    }

    fn write(&self, key: &str, compiled: &Compiled) -> std::io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let tmp = self.dir.join(format!(".{key}.{}.{nanos}.tmp", std::process::id()));
        let result = (|| {
            let mut file = fs::File::create(&tmp)?;
            file.write_all(&encode(compiled))?;
            file.sync_data()?;
            fs::rename(&tmp, self.entry(key))
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// Removes the oldest entries until the folder holds at most the bound (`keep` stays).
    fn evict(&self, keep: &Path) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        let mut files: Vec<(SystemTime, u64, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "kernel"))
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
        if total <= self.max_bytes {
            return;
        }
        files.sort();
        for (_, len, path) in files {
            if total <= self.max_bytes {
                break;
            }
            if path != keep && fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

/// The cache key: the SHA-256, in hex, of `parts`, each length-prefixed.
pub fn key(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn kind_code(kind: ImageKind) -> u8 {
    match kind {
        ImageKind::Ptx => 1,
        ImageKind::Cubin => 2,
        ImageKind::HipCodeObject => 3,
    }
}

/// `MAGIC | FORMAT u32 | kind u8 | names u32 | (len u32, text)* | image len u64 | image | SHA-256`.
fn encode(c: &Compiled) -> Vec<u8> {
    let mut out = Vec::with_capacity(c.image.len() + 128);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.push(kind_code(c.kind));
    out.extend_from_slice(&(c.lowered.len() as u32).to_le_bytes());
    for (expr, lowered) in &c.lowered {
        for text in [expr, lowered] {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
    }
    out.extend_from_slice(&(c.image.len() as u64).to_le_bytes());
    out.extend_from_slice(&c.image);
    let digest = Sha256::digest(&out);
    out.extend_from_slice(&digest);
    out
}

/// The entry, when it is whole and of this format.
fn decode(bytes: &[u8]) -> Option<Compiled> {
    let body = bytes.get(..bytes.len().checked_sub(DIGEST)?)?;
    if Sha256::digest(body).as_slice() != &bytes[body.len()..] {
        return None;
    }
    let mut r = Reader(body);
    if r.take(8)? != MAGIC || u32::from_le_bytes(r.take(4)?.try_into().ok()?) != FORMAT {
        return None;
    }
    let kind = match r.take(1)?[0] {
        1 => ImageKind::Ptx,
        2 => ImageKind::Cubin,
        3 => ImageKind::HipCodeObject,
        _ => return None,
    };
    let names = u32::from_le_bytes(r.take(4)?.try_into().ok()?);
    let mut lowered = Vec::new();
    for _ in 0..names {
        let mut text = || -> Option<String> {
            let len = u32::from_le_bytes(r.take(4)?.try_into().ok()?) as usize;
            String::from_utf8(r.take(len)?.to_vec()).ok()
        };
        lowered.push((text()?, text()?));
    }
    let len = usize::try_from(u64::from_le_bytes(r.take(8)?.try_into().ok()?)).ok()?;
    let image = r.take(len)?.to_vec();
    r.0.is_empty().then_some(Compiled { image, kind, lowered })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpuport-kcache-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn compiled(n: usize) -> Compiled {
        Compiled {
            image: vec![7u8; n],
            kind: ImageKind::Cubin,
            lowered: vec![("scale<float>".into(), "_Z5scaleIfEvPT_".into())],
        }
    }

    #[test]
    fn an_entry_reads_back_whole() {
        let cache = DiskCache::new(temp("rt"), DEFAULT_MAX_BYTES);
        let k = key(&[b"a", b"b"]);
        assert!(cache.get(&k).is_none());
        cache.put(&k, &compiled(100));
        let back = cache.get(&k).unwrap();
        assert_eq!((back.image.len(), back.kind, back.lowered), (100, ImageKind::Cubin, compiled(0).lowered));
        assert_ne!(key(&[b"ab"]), key(&[b"a", b"b"]), "parts are length-prefixed");
        fs::remove_dir_all(cache.dir()).unwrap();
    }

    #[test]
    fn truncated_or_corrupted_entries_are_removed_never_returned() {
        let cache = DiskCache::new(temp("bad"), DEFAULT_MAX_BYTES);
        let k = key(&[b"k"]);
        cache.put(&k, &compiled(1000));
        let path = cache.entry(&k);
        let whole = fs::read(&path).unwrap();
        for damaged in [whole[..whole.len() / 2].to_vec(), whole[..10].to_vec(), Vec::new(), {
            let mut d = whole.clone();
            d[200] ^= 1;
            d
        }] {
            fs::write(&path, &damaged).unwrap();
            assert!(cache.get(&k).is_none());
            assert!(!path.exists(), "a damaged entry is removed");
        }
        fs::remove_dir_all(cache.dir()).unwrap();
    }

    #[test]
    fn the_oldest_entries_go_first_beyond_the_bound() {
        // Each entry is 1,092 bytes: five hold 5,460, and 3,300 keeps three.
        let dir = temp("evict");
        let filling = DiskCache::new(&dir, DEFAULT_MAX_BYTES);
        let cache = DiskCache::new(&dir, 3300);
        let keys: Vec<String> = (0..4).map(|i| key(&[&[i]])).collect();
        for (i, k) in keys.iter().enumerate() {
            filling.put(k, &compiled(1000));
            // Distinct, increasing times whatever the file system's resolution.
            let file = fs::File::options().append(true).open(cache.entry(k)).unwrap();
            file.set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 + i as u64)).unwrap();
        }
        // The first entry is read: it becomes the newest, so the second is the oldest now.
        assert!(cache.get(&keys[0]).is_some());
        cache.put(&key(&[b"new"]), &compiled(1000));
        let present: Vec<bool> = keys.iter().map(|k| cache.entry(k).exists()).collect();
        assert_eq!(present, [true, false, false, true], "the two oldest evicted, the read one kept");
        fs::remove_dir_all(cache.dir()).unwrap();
    }
}
