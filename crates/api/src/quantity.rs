//! The parts of Kubernetes' `resource.Quantity` mco uses (the container runtime config controller, the
//! daemon's storage check): the integer value (`Value()`, rounded away from zero) and the canonical text (`String()`).

/// A parsed quantity: `mantissa × 10^exponent`, and whether it was written with a binary suffix
/// (`Ki`, `Mi`, ...), which the canonical text keeps when it can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    mantissa: i128,
    exponent: i32,
    binary: bool,
}

const DECIMAL_SUFFIXES: [(&str, i32); 10] =
    [("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

impl Quantity {
    /// `resource.ParseQuantity`, for the forms manifests use: a decimal number with a binary or
    /// decimal SI suffix or an `e` exponent.
    pub fn parse(text: &str) -> Result<Quantity, String> {
        const WRONG: &str =
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let number_len = unsigned.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(unsigned.len());
        let (number, suffix) = unsigned.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if number.is_empty() || fraction.contains('.') {
            return Err(WRONG.into());
        }
        let digits: i128 = format!("{whole}{fraction}").parse().map_err(|_| WRONG.to_string())?;
        let mut exponent = -(fraction.len() as i32);
        let mut mantissa = if negative { -digits } else { digits };
        let binary = match BINARY_SUFFIXES.iter().position(|s| !s.is_empty() && *s == suffix) {
            Some(power) => {
                mantissa *= 1i128 << (10 * power);
                true
            }
            None => {
                exponent += match DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
                    Some((_, e)) => *e,
                    None => suffix
                        .strip_prefix(['e', 'E'])
                        .and_then(|e| e.parse::<i32>().ok())
                        .ok_or("unable to parse quantity's suffix")?,
                };
                false
            }
        };
        Ok(Quantity { mantissa, exponent, binary })
    }

    /// `Value()`: the integer value, rounded away from zero.
    pub fn value(&self) -> i64 {
        let value = if self.exponent >= 0 {
            self.mantissa * 10i128.pow(self.exponent as u32)
        } else {
            let divisor = 10i128.pow(self.exponent.unsigned_abs());
            let (quotient, remainder) = (self.mantissa / divisor, self.mantissa % divisor);
            quotient + remainder.signum()
        };
        value.clamp(i64::MIN.into(), i64::MAX.into()) as i64
    }

    /// `String()`: binary suffix when written with one and the value is a whole number of at
    /// least 1024 in magnitude, else the decimal SI form with the exponent a multiple of 3.
    pub fn canonical(&self) -> String {
        if self.mantissa == 0 {
            return "0".into();
        }
        let whole = self.exponent >= 0 || self.mantissa % 10i128.pow(self.exponent.unsigned_abs()) == 0;
        if self.binary && whole && self.value().unsigned_abs() >= 1024 {
            let mut amount = i128::from(self.value());
            let mut power = 0;
            while amount % 1024 == 0 && power < 6 {
                amount /= 1024;
                power += 1;
            }
            return format!("{amount}{}", BINARY_SUFFIXES[power]);
        }
        let (mut amount, mut exponent) = (self.mantissa, self.exponent);
        while amount % 10 == 0 {
            amount /= 10;
            exponent += 1;
        }
        while exponent.rem_euclid(3) != 0 {
            amount *= 10;
            exponent -= 1;
        }
        match DECIMAL_SUFFIXES.iter().find(|(_, e)| *e == exponent) {
            Some((suffix, _)) => format!("{amount}{suffix}"),
            None => format!("{amount}e{exponent}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_canonical_texts_are_kubernetes_ones() {
        let cases: &[(&str, i64, &str)] = &[
            ("1Gi", 1 << 30, "1Gi"),
            ("1024Mi", 1 << 30, "1Gi"),
            ("1.5Gi", 3 << 29, "1536Mi"),
            ("0.5Ki", 512, "512"),
            ("10G", 10_000_000_000, "10G"),
            ("10000M", 10_000_000_000, "10G"),
            ("1500", 1500, "1500"),
            ("0.5G", 500_000_000, "500M"),
            ("1.5", 2, "1500m"),
            ("4Ki", 4096, "4Ki"),
            ("8192", 8192, "8192"),
            ("-1", -1, "-1"),
            ("-1G", -1_000_000_000, "-1G"),
            ("1e3", 1000, "1k"),
            ("0", 0, "0"),
        ];
        for (text, value, canonical) in cases {
            let q = Quantity::parse(text).unwrap();
            assert_eq!((q.value(), q.canonical().as_str()), (*value, *canonical), "{text}");
        }
        assert!(Quantity::parse("lots").is_err());
        assert!(Quantity::parse("1Xi").is_err());
    }
}
