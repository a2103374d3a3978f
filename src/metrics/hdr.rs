//! Latency histograms in HdrHistogram's compressed encoding (V2 + DEFLATE,
//! base64: the `HISTF...` strings of an interval log), so a recording's
//! histograms are a few hundred bytes each and any HdrHistogram library or
//! HistogramLogAnalyzer can read them. Decoding trusts nothing: sizes and
//! bounds are checked before the library allocates anything.

use std::io::Read;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

use super::recorder::{MAX_LATENCY_NS, SIGFIG, new_hist};

/// Longest encoded histogram accepted (base64 characters). A histogram of
/// every bucket of the recorders' range at 3 digits is under 20 KiB.
pub const MAX_ENCODED: usize = 256 * 1024;
/// Largest uncompressed V2 encoding accepted (bytes).
const MAX_INFLATED: u64 = 1 << 20;
/// The cookies of the V2 encoding and its compressed wrapper (word size 8
/// in the low bits, as every HdrHistogram library writes them).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;

/// Encodes `(value_ns, count)` pairs as a compressed V2 histogram, base64.
pub fn encode(pairs: &[(u64, u64)]) -> String {
    let mut h = new_hist();
    for &(v, n) in pairs {
        h.saturating_record_n(v, n);
    }
    encode_hist(&h)
}

/// Encodes a histogram as compressed V2, base64.
pub fn encode_hist(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .expect("serializing into memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Why an encoded histogram was refused ([`decode`]).
#[derive(Debug, thiserror::Error)]
pub enum HdrError {
    /// Longer than [`MAX_ENCODED`].
    #[error("an encoded histogram of {len} characters: allowed at most {MAX_ENCODED}")]
    TooLong {
        /// Its length, characters.
        len: usize,
    },
    /// Not base64.
    #[error("not a base64 HdrHistogram ({0})")]
    Base64(#[source] base64::DecodeError),
    /// A compressed payload that does not inflate.
    #[error("a damaged compressed HdrHistogram ({0})")]
    Inflate(#[source] std::io::Error),
    /// A compressed payload inflating past 1 MiB.
    #[error("a compressed HdrHistogram inflating past {} KiB", MAX_INFLATED / 1024)]
    Inflates,
    /// No V2 cookie.
    #[error("not an HdrHistogram V2 encoding (unknown cookie)")]
    Cookie,
    /// A short or foreign header.
    #[error("a damaged HdrHistogram (short or foreign header)")]
    Header,
    /// A payload longer than what is there.
    #[error("a damaged HdrHistogram (payload of {payload} bytes, {present} present)")]
    Payload {
        /// The payload's length the header says.
        payload: usize,
        /// The bytes there are.
        present: usize,
    },
    /// More significant digits than readpath's, or a bad value range.
    #[error(
        "an HdrHistogram with {digits} significant digits over {low}..={high}: \
         allowed at most {SIGFIG} digits and a lowest value of at least 1"
    )]
    Range {
        /// Its significant digits.
        digits: u32,
        /// Its lowest trackable value.
        low: u64,
        /// Its highest.
        high: u64,
    },
    /// The library refused it.
    #[error("a damaged HdrHistogram ({0:?})")]
    Deserialize(hdrhistogram::serialization::DeserializeError),
}

/// Decodes a compressed (or plain) V2 histogram written by any HdrHistogram
/// library into `(value_ns, count)` pairs, each value its bucket's highest
/// equivalent, values above the recorders' 100 s saturating there as they
/// do. Refused before anything is allocated: an over-long string, a
/// payload that inflates past 1 MiB or is longer than what is there, more
/// than 3 significant digits (which bounds what the library allocates for
/// any value range).
pub fn decode(text: &str) -> Result<Vec<(u64, u64)>, HdrError> {
    if text.len() > MAX_ENCODED {
        return Err(HdrError::TooLong { len: text.len() });
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(HdrError::Base64)?;
    let v2 = match cookie(&raw, 0) {
        Some(V2_COMPRESSED_COOKIE) => {
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(raw.get(8..).unwrap_or_default())
                .take(MAX_INFLATED + 1)
                .read_to_end(&mut out)
                .map_err(HdrError::Inflate)?;
            if out.len() as u64 > MAX_INFLATED {
                return Err(HdrError::Inflates);
            }
            out
        }
        Some(V2_COOKIE) => raw,
        _ => return Err(HdrError::Cookie),
    };
    // The header: cookie, payload length, normalizing offset, significant
    // digits, lowest and highest trackable value, integer-to-double ratio.
    if cookie(&v2, 0) != Some(V2_COOKIE) || v2.len() < 40 {
        return Err(HdrError::Header);
    }
    let payload = u32::from_be_bytes(v2[4..8].try_into().unwrap()) as usize;
    let digits = u32::from_be_bytes(v2[12..16].try_into().unwrap());
    let low = u64::from_be_bytes(v2[16..24].try_into().unwrap());
    let high = u64::from_be_bytes(v2[24..32].try_into().unwrap());
    if payload > v2.len() - 40 {
        return Err(HdrError::Payload {
            payload,
            present: v2.len() - 40,
        });
    }
    if digits > u32::from(SIGFIG) || low < 1 || low > high {
        return Err(HdrError::Range { digits, low, high });
    }
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut &v2[..])
        .map_err(HdrError::Deserialize)?;
    let mut pairs: Vec<(u64, u64)> = Vec::new();
    for v in h.iter_recorded() {
        let value = v.value_iterated_to().min(MAX_LATENCY_NS);
        match pairs.last_mut() {
            Some(last) if last.0 == value => last.1 = last.1.saturating_add(v.count_at_value()),
            _ => pairs.push((value, v.count_at_value())),
        }
    }
    Ok(pairs)
}

fn cookie(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_exactly() {
        let mut h = new_hist();
        for v in [1u64, 999, 1_000, 12_345, 250_000, 3_000_000, 99_000_000_000] {
            h.record_n(v, v % 7 + 1).unwrap();
        }
        let pairs: Vec<(u64, u64)> = h
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        let text = encode(&pairs);
        assert!(text.starts_with("HISTF"), "{text}");
        assert_eq!(decode(&text).unwrap(), pairs);
        assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
    }

    #[test]
    fn reads_what_the_reference_implementation_wrote() {
        // The first interval of HdrHistogram's tagged-Log.logV2.hlog, written
        // by jHiccup (the Java library): its line gives the interval's
        // maximum, 2.769 ms, computed by the Java writer from this histogram.
        let java = "HISTFAAAAEV42pNpmSzMwMCgyAABTBDKT4GBgdnNYMcCBvsPEBEJISEuATEZMQ4uASkhIR4nrxg9v2lMaxhvMekILGZkKmcCAEf2CsI=";
        let pairs = decode(java).unwrap();
        let max_ms = pairs.last().unwrap().0 as f64 / 1e6;
        assert_eq!(format!("{max_ms:.3}"), "2.769");
        assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0));
        // Re-encoded by readpath and decoded again: the same buckets.
        assert_eq!(decode(&encode(&pairs)).unwrap(), pairs);
    }

    #[test]
    fn refuses_hostile_encodings() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        assert!(
            decode("not base64 at all!")
                .unwrap_err()
                .to_string()
                .contains("base64")
        );
        assert!(
            decode(&b64(b"\x00\x00\x00\x00"))
                .unwrap_err()
                .to_string()
                .contains("cookie")
        );
        // A plain V2 header claiming 5 digits (the library would allocate
        // for them).
        let mut v2 = Vec::new();
        v2.extend(V2_COOKIE.to_be_bytes());
        v2.extend(0u32.to_be_bytes());
        v2.extend(0u32.to_be_bytes());
        v2.extend(5u32.to_be_bytes());
        v2.extend(1u64.to_be_bytes());
        v2.extend(u64::MAX.to_be_bytes());
        v2.extend(1f64.to_be_bytes());
        let e = decode(&b64(&v2)).unwrap_err().to_string();
        assert!(
            e.contains("5 significant digits") && e.contains("allowed"),
            "{e}"
        );
        // A payload length past the end (the library would allocate it).
        v2[12..16].copy_from_slice(&3u32.to_be_bytes());
        v2[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(
            decode(&b64(&v2))
                .unwrap_err()
                .to_string()
                .contains("payload")
        );
        // A zlib bomb: 64 MiB of zeros behind a compressed cookie.
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut z, &vec![0u8; 64 << 20]).unwrap();
        let mut bomb = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        let body = z.finish().unwrap();
        bomb.extend((body.len() as u32).to_be_bytes());
        bomb.extend(body);
        assert!(
            decode(&b64(&bomb))
                .unwrap_err()
                .to_string()
                .contains("inflating past")
        );
        assert!(
            decode(&"A".repeat(MAX_ENCODED + 4))
                .unwrap_err()
                .to_string()
                .contains("allowed at most")
        );
    }
}
