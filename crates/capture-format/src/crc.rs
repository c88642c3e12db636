//! CRC-32C (Castagnoli), table-driven.

/// CRC-32C (Castagnoli) of `data`: the datagram checksum both ends compute.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_update(!0, data) ^ !0
}

/// Continues a CRC-32C over more data (`state` starts at `!0`; finish with `^ !0`).
/// A byte at a time through a table: it runs inside intercepted datagram calls.
pub fn crc32c_update(mut state: u32, data: &[u8]) -> u32 {
    for &b in data {
        state = CRC32C_TABLE[((state ^ u32::from(b)) & 0xff) as usize] ^ (state >> 8);
    }
    state
}

/// The CRC-32C (reflected polynomial 0x82F63B78) of each byte value.
static CRC32C_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};
