//! Whether a program is one the preload library can enter: a dynamically linked ELF
//! file names an interpreter (`PT_INTERP`); a static one (static musl, Go, static-pie)
//! ignores `LD_PRELOAD`, so its sockets are invisible to the capture.

/// Bytes of a program's start enough to answer (its ELF header and program headers).
pub const HEAD: usize = 4096;

/// `Some(true)` for a statically linked 64-bit little-endian ELF program, `Some(false)`
/// for a dynamically linked one, `None` when `head` is not such an ELF file (a script
/// starting with `#!` is run by its interpreter, which is what gets checked).
pub fn is_static(head: &[u8]) -> Option<bool> {
    if head.get(..4)? != b"\x7fELF" || *head.get(4)? != 2 || *head.get(5)? != 1 {
        return None;
    }
    let u16_at = |at: usize| -> Option<u16> {
        Some(u16::from_le_bytes(
            head.get(at..at.checked_add(2)?)?.try_into().ok()?,
        ))
    };
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            head.get(at..at.checked_add(4)?)?.try_into().ok()?,
        ))
    };
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            head.get(at..at.checked_add(8)?)?.try_into().ok()?,
        ))
    };
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    if phentsize < 4 {
        return None;
    }
    const PT_INTERP: u32 = 3;
    for i in 0..phnum {
        let at = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(at)? == PT_INTERP {
            return Some(false);
        }
    }
    Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_is_dynamic_and_text_is_not_elf() {
        let exe = std::fs::read(std::env::current_exe().expect("the test's path")).expect("read");
        assert_eq!(is_static(&exe[..HEAD.min(exe.len())]), Some(false));
        assert_eq!(is_static(b"#!/bin/sh\necho hi\n"), None);
    }

    #[test]
    fn an_elf_header_without_an_interpreter_is_static() {
        let mut head = vec![0u8; 0x40 + 2 * 56];
        head[..6].copy_from_slice(b"\x7fELF\x02\x01");
        head[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes());
        head[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        head[0x38..0x3a].copy_from_slice(&2u16.to_le_bytes());
        head[0x40..0x44].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        head[0x78..0x7c].copy_from_slice(&6u32.to_le_bytes()); // PT_PHDR
        assert_eq!(is_static(&head), Some(true));
        head[0x78..0x7c].copy_from_slice(&3u32.to_le_bytes()); // PT_INTERP
        assert_eq!(is_static(&head), Some(false));
        // Program headers past what was read: not enough to answer.
        assert_eq!(is_static(&head[..0x50]), None);
    }
}
