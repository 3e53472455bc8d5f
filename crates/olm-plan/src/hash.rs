//! Upstream's hash encoding, `base62(sha224(bytes))`
//! (`pkg/lib/kubernetes/pkg/util/hash.DeepHashObject` and the
//! `olm.permissions.hash` label): the SHA-224 digest read as a big-endian
//! unsigned integer and written in base 62 with Go's digit order `0-9a-zA-Z`
//! (`big.Int.Text(62)`), at most 38 characters, so it fits a label value.
//! Part of a lookup contract: OLM finds the RBAC it created again by it.

use sha2::{Digest, Sha224};

/// Go's `big.Int.Text(62)` digits.
const BASE62_DIGITS: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Writes a big-endian unsigned integer in base 62 as Go's `big.Int.Text(62)`
/// does: no leading zeros, `"0"` for zero.
pub fn base62(big_endian: &[u8]) -> String {
    let mut number: Vec<u8> = big_endian
        .iter()
        .copied()
        .skip_while(|byte| *byte == 0)
        .collect();
    if number.is_empty() {
        return "0".to_owned();
    }
    let mut digits = Vec::new();
    while !number.is_empty() {
        // Long division of the whole number by 62, keeping the remainder.
        let mut remainder: u32 = 0;
        let mut quotient = Vec::with_capacity(number.len());
        for byte in &number {
            let accumulated = remainder * 256 + u32::from(*byte);
            let digit = accumulated / 62;
            remainder = accumulated % 62;
            if !(quotient.is_empty() && digit == 0) {
                // Every digit is below 256 because `remainder < 62`.
                quotient.push(u8::try_from(digit).unwrap_or(u8::MAX));
            }
        }
        digits.push(BASE62_DIGITS[remainder as usize]);
        number = quotient;
    }
    digits.reverse();
    digits.into_iter().map(char::from).collect()
}

/// `base62(sha224(bytes))`, upstream's hash encoding.
pub fn sha224_base62(bytes: &[u8]) -> String {
    base62(&Sha224::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base62_matches_go_big_int_text() {
        // Vectors computed with Go: big.Int.SetBytes(sha256.Sum224(s)).Text(62).
        assert_eq!(sha224_base62(b""), "aAkHCkvjglfF66mdhRcVKb0I3FT1lepYlWZNwj");
        assert_eq!(
            sha224_base62(b"a"),
            "8GQDPLPhRixGNeqR4eV0Va2vIGohVCYHMHiPFX"
        );
        assert_eq!(
            sha224_base62(b"widget"),
            "9uDOrjGmvcXUxBiuvHcc7VRwj9HJVcrKvmqwIQ"
        );
        assert_eq!(base62(&[0; 28]), "0");
        assert_eq!(base62(&[]), "0");
        assert_eq!(base62(&[61]), "Z");
        assert_eq!(base62(&[62]), "10");
        assert_eq!(base62(&[0, 1, 0]), "48");
    }
}
