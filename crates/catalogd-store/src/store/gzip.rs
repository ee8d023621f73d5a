//! gzip on every core, as pigz does: the input is cut into chunks that are deflated in
//! parallel, each primed with the 32 KiB of input before it (so matches reach back across the
//! cut and the ratio stays that of one stream), each but the last ending on a byte boundary
//! (a sync flush). The pieces concatenate into one deflate stream inside one gzip member, so any
//! gzip reader, including those that stop after the first member, reads all of it.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use flate2::{Compress, Compression, FlushCompress, Status};

/// Bytes per chunk: large enough that the per-chunk cost (a flush, a primed dictionary) is
/// noise, small enough that two cores share a few MiB evenly.
const CHUNK: usize = 1 << 20;
/// The deflate window: what a chunk's dictionary holds.
const WINDOW: usize = 32 * 1024;

/// The gzip (RFC 1952) of `input` at `level`, compressed on up to `threads` threads.
#[cfg(test)]
pub fn compress(input: &[u8], level: u32, threads: usize) -> Vec<u8> {
    let read = |offset: usize, len: usize| Ok(input[offset..offset + len].to_vec());
    // Reading from memory cannot fail.
    compress_with(input.len(), &read, level, threads).unwrap_or_default()
}

/// The gzip of the first `len` bytes of `file` at `level`, on up to `threads` threads, each
/// reading only the chunk it compresses (and the window before it): memory stays a few MiB
/// whatever the file's size.
pub fn compress_file(file: &File, len: u64, level: u32, threads: usize) -> io::Result<Vec<u8>> {
    let len = usize::try_from(len).map_err(io::Error::other)?;
    let read = |offset: usize, size: usize| {
        let mut buf = vec![0; size];
        file.read_exact_at(&mut buf, offset as u64)?;
        Ok(buf)
    };
    compress_with(len, &read, level, threads)
}

type Reader<'a> = dyn Fn(usize, usize) -> io::Result<Vec<u8>> + Sync + 'a;

fn compress_with(len: usize, read: &Reader<'_>, level: u32, threads: usize) -> io::Result<Vec<u8>> {
    let chunks = len.div_ceil(CHUNK).max(1);
    // Each worker takes the next chunk index; its result (deflate bytes, crc, length) lands in
    // that chunk's slot.
    type Slot = Mutex<Option<io::Result<(Vec<u8>, u32, usize)>>>;
    let slots: Vec<Slot> = (0..chunks).map(|_| Mutex::default()).collect();
    let next = AtomicUsize::new(0);
    let run = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = slots.get(i) else { break };
            let start = i * CHUNK;
            let end = (start + CHUNK).min(len);
            let window = start.min(WINDOW);
            let result = read(start - window, window + end - start).map(|bytes| {
                let (dictionary, chunk) = bytes.split_at(window);
                let mut crc = crc32fast::Hasher::new();
                crc.update(chunk);
                let out = deflate_chunk(chunk, dictionary, level, i + 1 == chunks);
                (out, crc.finalize(), chunk.len())
            });
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.clamp(1, chunks) {
            // A thread that cannot be spawned leaves its share to the others.
            let _ = std::thread::Builder::new()
                .name("store-gzip".into())
                .spawn_scoped(scope, run);
        }
        run();
    });
    let mut gz = Vec::new();
    // Header: magic, deflate, no flags, no mtime (the same content gives the same bytes), no
    // extra flags, OS "unknown".
    gz.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255]);
    let mut crc = crc32fast::Hasher::new();
    for slot in slots {
        let part = slot
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or_else(|| Err(io::Error::other("a gzip chunk was not compressed")))?;
        gz.extend_from_slice(&part.0);
        // The chunks' checksums fold into the whole input's.
        crc.combine(&crc32fast::Hasher::new_with_initial_len(
            part.1,
            part.2 as u64,
        ));
    }
    gz.extend_from_slice(&crc.finalize().to_le_bytes());
    // ISIZE is the length modulo 2^32, by definition.
    gz.extend_from_slice(&(len as u32).to_le_bytes());
    Ok(gz)
}

/// Raw deflate of one chunk, primed with `dictionary`, ending with a sync flush (or, for the
/// last chunk, the final block).
fn deflate_chunk(chunk: &[u8], dictionary: &[u8], level: u32, last: bool) -> Vec<u8> {
    let mut z = Compress::new(Compression::new(level), false);
    if !dictionary.is_empty() {
        // Only fails for a stream that has started, which this one has not.
        let _ = z.set_dictionary(dictionary);
    }
    let mut out = Vec::with_capacity(chunk.len() / 4 + 1024);
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    let mut consumed = 0;
    loop {
        if out.capacity() - out.len() < 64 * 1024 {
            out.reserve(out.capacity().max(64 * 1024));
        }
        let before_in = z.total_in();
        let status = z.compress_vec(&chunk[consumed..], &mut out, flush);
        consumed += (z.total_in() - before_in) as usize;
        match status {
            Ok(Status::StreamEnd) => break,
            Ok(_) if consumed == chunk.len() && !last && out.capacity() > out.len() => break,
            Ok(_) => {}
            // Cannot happen with a buffer to write to; stop rather than spin.
            Err(_) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn gunzip_first_member(gz: &[u8]) -> Vec<u8> {
        // GzDecoder reads one member only: the whole content must be in it.
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    fn sample(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| {
                b"{\"schema\":\"olm.bundle\",\"name\":\"x\"}\n"[i % 35] ^ ((i / 997) as u8 & 1)
            })
            .collect()
    }

    #[test]
    fn parallel_chunks_make_one_member_that_any_reader_reads_whole() {
        for len in [0, 1, 1000, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 12_345] {
            let input = sample(len);
            for threads in [1, 2, 4] {
                let gz = compress(&input, 6, threads);
                assert_eq!(
                    gunzip_first_member(&gz),
                    input,
                    "len {len}, {threads} threads"
                );
            }
        }
    }

    #[test]
    fn a_file_compresses_to_the_same_bytes_as_its_content() {
        let input = sample(2 * CHUNK + 777);
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, &input).unwrap();
        let gz = compress_file(&file, input.len() as u64, 6, 2).unwrap();
        assert_eq!(gz, compress(&input, 6, 2));
        assert_eq!(gunzip_first_member(&gz), input);
    }

    #[test]
    fn the_output_is_deterministic_and_as_small_as_one_stream() {
        let input = sample(4 * CHUNK);
        let a = compress(&input, 6, 2);
        assert_eq!(a, compress(&input, 6, 1), "thread count changes the bytes");
        let mut single = flate2::write::GzEncoder::new(Vec::new(), Compression::new(6));
        std::io::Write::write_all(&mut single, &input).unwrap();
        let single = single.finish().unwrap();
        // Priming each chunk with the window before it keeps the ratio: within 0.1%.
        assert!(
            a.len() as f64 <= single.len() as f64 * 1.001 + 64.0,
            "{} vs {}",
            a.len(),
            single.len()
        );
    }
}
