// ---------------------------------------------------------------------------------------------
// The runtime of launchers exported by atrex-tui (the same in every exported header; guarded, so
// that several operators' headers can be included in one translation unit). It evaluates the
// expression language of launch plans exactly as atrex-tui does (integers exact, `/` an integer
// when it divides evenly, `//` floor division, `%` never negative, lists broadcast) and launches
// a resolved plan on a stream. Needs C++17 and the CUDA runtime API; tensor maps need <cuda.h>
// and the driver library (-lcuda). No exceptions are thrown: errors come back as messages.
// ---------------------------------------------------------------------------------------------
#ifndef ATREX_EXPORT_RUNTIME_HPP
#define ATREX_EXPORT_RUNTIME_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

namespace atrex_export_rt {

// -- values -----------------------------------------------------------------------------------

struct Value {
  enum Kind { Int, Float, Bool, Str, List } k = Int;
  long long i = 0;
  double f = 0.0;
  bool b = false;
  std::string s;
  std::vector<Value> l;

  static Value I(long long v) { Value x; x.k = Int; x.i = v; return x; }
  static Value F(double v) { Value x; x.k = Float; x.f = v; return x; }
  static Value B(bool v) { Value x; x.k = Bool; x.b = v; return x; }
  static Value S(const std::string& v) { Value x; x.k = Str; x.s = v; return x; }
  static Value L(std::vector<Value> v) { Value x; x.k = List; x.l = std::move(v); return x; }
  static Value Ints(const std::vector<int64_t>& v) {
    std::vector<Value> out;
    for (int64_t e : v) out.push_back(I(static_cast<long long>(e)));
    return L(std::move(out));
  }
};

using Env = std::map<std::string, Value>;

// The first error of an evaluation, and where it happened.
struct Ctx {
  bool failed = false;
  std::string msg;
  std::string where;
  void at(const std::string& w) { if (!failed) where = w; }
  void fail(const std::string& m) {
    if (!failed) {
      failed = true;
      msg = where.empty() ? m : where + ": " + m;
    }
  }
  bool report(std::string* error) const {
    if (error) *error = msg;
    return false;
  }
};

inline const char* type_name(const Value& v) {
  switch (v.k) {
    case Value::Int: return "integer";
    case Value::Float: return "float";
    case Value::Bool: return "bool";
    case Value::Str: return "string";
    default: return "list";
  }
}

inline std::string show(const Value& v) {
  std::ostringstream o;
  switch (v.k) {
    case Value::Int: o << v.i; break;
    case Value::Float: o.precision(17); o << v.f; break;
    case Value::Bool: o << (v.b ? "true" : "false"); break;
    case Value::Str: o << '"' << v.s << '"'; break;
    default:
      o << '[';
      for (size_t n = 0; n < v.l.size(); ++n) o << (n ? ", " : "") << show(v.l[n]);
      o << ']';
  }
  return o.str();
}

// Integers, floats and bools as a double.
inline bool num(const Value& v, double* out) {
  switch (v.k) {
    case Value::Int: *out = static_cast<double>(v.i); return true;
    case Value::Float: *out = v.f; return true;
    case Value::Bool: *out = v.b ? 1.0 : 0.0; return true;
    default: return false;
  }
}

// A double to an integer as a saturating cast does (NaN gives 0).
inline long long sat(double x) {
  if (std::isnan(x)) return 0;
  if (x >= 9223372036854775807.0) return std::numeric_limits<long long>::max();
  if (x <= -9223372036854775808.0) return std::numeric_limits<long long>::min();
  return static_cast<long long>(x);
}

// Integers, integral floats and bools as an exact integer.
inline bool as_int(const Value& v, long long* out) {
  switch (v.k) {
    case Value::Int: *out = v.i; return true;
    case Value::Bool: *out = v.b ? 1 : 0; return true;
    case Value::Float:
      if (std::isfinite(v.f) && std::trunc(v.f) == v.f && std::fabs(v.f) < 9.2e18) {
        *out = static_cast<long long>(v.f);
        return true;
      }
      return false;
    default: return false;
  }
}

inline Value var(Ctx& c, const Env& E, const char* name) {
  auto it = E.find(name);
  if (it == E.end()) {
    c.fail(std::string("unknown name `") + name + "`");
    return Value();
  }
  return it->second;
}

inline Value neg(Ctx& c, const Value& v) {
  switch (v.k) {
    case Value::Int:
      if (v.i == std::numeric_limits<long long>::min()) { c.fail("integer overflow in `-`"); return Value(); }
      return Value::I(-v.i);
    case Value::Float: return Value::F(-v.f);
    case Value::List: {
      std::vector<Value> out;
      for (const Value& x : v.l) out.push_back(neg(c, x));
      return Value::L(std::move(out));
    }
    default:
      c.fail(std::string("cannot negate a ") + type_name(v));
      return Value();
  }
}

inline Value int_pow(Ctx& c, long long x, long long y) {
  long long r = 1, base = x;
  while (y > 0) {
    if (y & 1) {
      if (__builtin_mul_overflow(r, base, &r)) { c.fail("integer overflow in `**`"); return Value(); }
    }
    y >>= 1;
    if (y > 0 && __builtin_mul_overflow(base, base, &base)) { c.fail("integer overflow in `**`"); return Value(); }
  }
  return Value::I(r);
}

inline Value scalar(Ctx& c, const char* op, const Value& a, const Value& b) {
  const std::string o(op);
  if (o == "<" || o == "<=" || o == ">" || o == ">=" || o == "==" || o == "!=") {
    if (a.k == Value::Str && b.k == Value::Str) {
      if (o == "==") return Value::B(a.s == b.s);
      if (o == "!=") return Value::B(a.s != b.s);
      c.fail("`" + o + "` needs numbers");
      return Value();
    }
    double x = 0, y = 0;
    if (!num(a, &x) || !num(b, &y)) {
      c.fail("`" + o + "` needs numbers, got " + type_name(a) + " and " + type_name(b));
      return Value();
    }
    if (a.k == Value::Int && b.k == Value::Int) {
      const long long i = a.i, j = b.i;
      if (o == "<") return Value::B(i < j);
      if (o == "<=") return Value::B(i <= j);
      if (o == ">") return Value::B(i > j);
      if (o == ">=") return Value::B(i >= j);
      if (o == "==") return Value::B(i == j);
      return Value::B(i != j);
    }
    if (o == "<") return Value::B(x < y);
    if (o == "<=") return Value::B(x <= y);
    if (o == ">") return Value::B(x > y);
    if (o == ">=") return Value::B(x >= y);
    if (o == "==") return Value::B(x == y);
    return Value::B(x != y);
  }
  if (a.k == Value::Int && b.k == Value::Int) {
    const long long x = a.i, y = b.i;
    long long r = 0;
    if (o == "+") { if (__builtin_add_overflow(x, y, &r)) { c.fail("integer overflow in `+`"); return Value(); } return Value::I(r); }
    if (o == "-") { if (__builtin_sub_overflow(x, y, &r)) { c.fail("integer overflow in `-`"); return Value(); } return Value::I(r); }
    if (o == "*") { if (__builtin_mul_overflow(x, y, &r)) { c.fail("integer overflow in `*`"); return Value(); } return Value::I(r); }
    if (o == "/") {
      if (y == 0) { c.fail("division by zero"); return Value(); }
      if (x % y == 0) return Value::I(x / y);
      return Value::F(static_cast<double>(x) / static_cast<double>(y));
    }
    if (o == "//") {
      if (y == 0) { c.fail("division by zero"); return Value(); }
      long long q = x / y;
      if (x % y != 0 && ((x < 0) != (y < 0))) q -= 1;
      return Value::I(q);
    }
    if (o == "%") {
      if (y == 0) { c.fail("modulo by zero"); return Value(); }
      long long m = x % y;
      if (m < 0) m += (y < 0 ? -y : y);
      return Value::I(m);
    }
    if (o == "**") {
      if (y >= 0) return int_pow(c, x, y);
      return Value::F(std::pow(static_cast<double>(x), static_cast<double>(y)));
    }
    c.fail("unknown operator `" + o + "`");
    return Value();
  }
  double x = 0, y = 0;
  if (!num(a, &x) || !num(b, &y)) {
    c.fail("`" + o + "` needs numbers, got " + type_name(a) + " and " + type_name(b));
    return Value();
  }
  if (o == "+") return Value::F(x + y);
  if (o == "-") return Value::F(x - y);
  if (o == "*") return Value::F(x * y);
  if (o == "/") {
    if (y == 0.0) { c.fail("division by zero"); return Value(); }
    return Value::F(x / y);
  }
  if (o == "//") {
    if (y == 0.0) { c.fail("division by zero"); return Value(); }
    if (!std::isfinite(x / y)) { c.fail("`//` gives a non-finite number, not an integer"); return Value(); }
    return Value::I(sat(std::floor(x / y)));
  }
  if (o == "%") {
    if (y == 0.0) { c.fail("modulo by zero"); return Value(); }
    double r = std::fmod(x, y);
    return Value::F(r < 0.0 ? r + std::fabs(y) : r);
  }
  if (o == "**") return Value::F(std::pow(x, y));
  c.fail("unknown operator `" + o + "`");
  return Value();
}

// A binary operator; lists broadcast element-wise.
inline Value bin(Ctx& c, const char* op, const Value& a, const Value& b) {
  if (c.failed) return Value();
  if (a.k == Value::List && b.k == Value::List) {
    if (a.l.size() != b.l.size()) {
      c.fail("lists of lengths " + std::to_string(a.l.size()) + " and " +
             std::to_string(b.l.size()) + " in `" + op + "`");
      return Value();
    }
    std::vector<Value> out;
    for (size_t n = 0; n < a.l.size(); ++n) out.push_back(bin(c, op, a.l[n], b.l[n]));
    return Value::L(std::move(out));
  }
  if (a.k == Value::List) {
    std::vector<Value> out;
    for (const Value& x : a.l) out.push_back(bin(c, op, x, b));
    return Value::L(std::move(out));
  }
  if (b.k == Value::List) {
    std::vector<Value> out;
    for (const Value& y : b.l) out.push_back(bin(c, op, a, y));
    return Value::L(std::move(out));
  }
  return scalar(c, op, a, b);
}

template <typename F>
inline Value map1(const Value& v, F f) {
  if (v.k == Value::List) {
    std::vector<Value> out;
    for (const Value& x : v.l) out.push_back(map1(x, f));
    return Value::L(std::move(out));
  }
  return f(v);
}

// A built-in function (min, max, ceil, floor, sqrt, log2, exp, float, int, sum, prod, numel,
// if, len); every argument has been evaluated.
inline Value call(Ctx& c, const char* fn, std::vector<Value> args) {
  if (c.failed) return Value();
  const std::string name(fn);
  auto one = [&](Value* out) {
    if (args.size() != 1) {
      c.fail("`" + name + "` takes one argument, got " + std::to_string(args.size()));
      return false;
    }
    *out = args[0];
    return true;
  };
  if (name == "min" || name == "max") {
    std::vector<Value> xs = args;
    if (args.size() == 1 && args[0].k == Value::List) xs = args[0].l;
    else if (args.empty()) { c.fail("`" + name + "` needs at least one argument"); return Value(); }
    if (xs.empty()) { c.fail("`" + name + "` of an empty list"); return Value(); }
    Value best = xs[0];
    for (size_t n = 1; n < xs.size(); ++n) {
      double a = 0, b = 0;
      if (!num(best, &a) || !num(xs[n], &b)) { c.fail("`" + name + "` needs numbers"); return Value(); }
      if (name == "min" ? b < a : b > a) best = xs[n];
    }
    return best;
  }
  Value v;
  if (name == "ceil" || name == "floor") {
    if (!one(&v)) return Value();
    return map1(v, [&](const Value& x) -> Value {
      if (x.k == Value::Int) return x;
      if (x.k == Value::Float && !std::isfinite(x.f)) {
        c.fail("`" + name + "` gives a non-finite number, not an integer");
        return Value();
      }
      if (x.k == Value::Float) return Value::I(sat(name == "ceil" ? std::ceil(x.f) : std::floor(x.f)));
      c.fail("`" + name + "` needs a number, got a " + type_name(x));
      return Value();
    });
  }
  if (name == "sqrt" || name == "log2" || name == "exp" || name == "float") {
    if (!one(&v)) return Value();
    return map1(v, [&](const Value& x) -> Value {
      double d = 0;
      if (!num(x, &d)) { c.fail("`" + name + "` needs a number, got a " + type_name(x)); return Value(); }
      if (name == "sqrt") return Value::F(std::sqrt(d));
      if (name == "log2") return Value::F(std::log2(d));
      if (name == "exp") return Value::F(std::exp(d));
      return Value::F(d);
    });
  }
  if (name == "int") {
    if (!one(&v)) return Value();
    return map1(v, [&](const Value& x) -> Value {
      double d = 0;
      if (!num(x, &d)) { c.fail("`int` needs a number, got a " + std::string(type_name(x))); return Value(); }
      if (!std::isfinite(d)) { c.fail("`int` gives a non-finite number, not an integer"); return Value(); }
      return Value::I(sat(std::trunc(d)));
    });
  }
  if (name == "sum" || name == "prod" || name == "numel") {
    if (!one(&v)) return Value();
    if (v.k != Value::List) { c.fail("`" + name + "` needs a list, got a " + type_name(v)); return Value(); }
    Value acc = Value::I(name == "sum" ? 0 : 1);
    for (const Value& x : v.l) acc = bin(c, name == "sum" ? "+" : "*", acc, x);
    return acc;
  }
  if (name == "if") {
    if (args.size() != 3) {
      c.fail("`if` takes (condition, then, else), got " + std::to_string(args.size()) + " arguments");
      return Value();
    }
    bool cond = false;
    if (args[0].k == Value::Bool) cond = args[0].b;
    else {
      double d = 0;
      if (!num(args[0], &d)) { c.fail(std::string("`if` needs a condition, got a ") + type_name(args[0])); return Value(); }
      cond = d != 0.0;
    }
    return cond ? args[1] : args[2];
  }
  if (name == "len") {
    if (!one(&v)) return Value();
    if (v.k != Value::List) { c.fail(std::string("`len` needs a list, got a ") + type_name(v)); return Value(); }
    return Value::I(static_cast<long long>(v.l.size()));
  }
  c.fail("unknown function `" + name + "`");
  return Value();
}

inline Value index(Ctx& c, const Value& v, const Value& i) {
  if (c.failed) return Value();
  if (v.k != Value::List) { c.fail(std::string("cannot index a ") + type_name(v)); return Value(); }
  long long k = 0;
  if (!as_int(i, &k)) { c.fail("index must be an integer"); return Value(); }
  if (k < 0) k += static_cast<long long>(v.l.size());
  if (k < 0 || k >= static_cast<long long>(v.l.size())) {
    c.fail("index " + std::to_string(k) + " out of range (length " + std::to_string(v.l.size()) + ")");
    return Value();
  }
  return v.l[static_cast<size_t>(k)];
}

// -- a resolved plan ----------------------------------------------------------------------------

enum ArgKind { ArgBuffer, ArgTensorMap, ArgI32, ArgI64, ArgU32, ArgU64, ArgF32, ArgF64 };

struct Arg {
  ArgKind kind = ArgBuffer;
  int index = 0;          // the buffer (ArgBuffer) or the tensor map (ArgTensorMap)
  long long i = 0;        // ArgI32, ArgI64, ArgU32 (as a non-negative value)
  unsigned long long u = 0;  // ArgU64
  double f = 0.0;         // ArgF32 (rounded when launched), ArgF64
};

struct TensorMap {
  std::string name;
  int buffer = 0;
  std::string dtype;
  unsigned long long esize = 1;
  int rank = 0;
  unsigned long long dims[5] = {0, 0, 0, 0, 0};
  unsigned long long strides[4] = {0, 0, 0, 0};  // bytes, of dims 1..
  unsigned int box[5] = {0, 0, 0, 0, 0};
  unsigned int element_strides[5] = {0, 0, 0, 0, 0};
  int interleave = 0, swizzle = 0, l2_promotion = 0, oob_fill = 0;  // the driver's enums
  unsigned long long extent = 0;  // the bytes reached from the buffer's start
  int line = 0;
  bool skipped = false;  // no launch that uses it runs on this shape: neither checked nor encoded
};

struct Launch {
  int kernel = 0;  // index into the kernel table
  std::string name;
  unsigned int grid[3] = {1, 1, 1};
  unsigned int block[3] = {1, 1, 1};
  unsigned int smem = 0;
  bool has_cluster = false;
  unsigned int cluster[3] = {1, 1, 1};
  // Every block resident at once, or the launch fails (a grid barrier cannot wait forever).
  bool cooperative = false;
  std::vector<Arg> args;
  int line = 0;
};

struct Tensor {
  std::string name;
  std::string dtype;
  std::vector<long long> dims;
  unsigned long long bytes = 0;
};

struct Scratch {
  std::string name;
  std::string dtype;
  unsigned long long elements = 0;
  unsigned long long bytes = 0;
  unsigned long long offset = 0;  // in the workspace (256-byte aligned)
  bool zero = false;              // zeroed before the launches; else left as it is
};

// Buffers are numbered inputs first, then outputs, then scratch (in the workspace).
struct Plan {
  std::vector<Tensor> inputs, outputs;
  std::vector<Scratch> scratch;
  std::vector<TensorMap> tensor_maps;
  std::vector<Launch> launches;
  unsigned long long workspace_bytes = 0;
};

// Bytes per element of a dtype of the suite (bf16, fp32, int32, fp8_e4m3, ...).
inline unsigned long long dtype_size(const std::string& d) {
  if (d == "bf16" || d == "fp16") return 2;
  if (d == "fp32" || d == "int32" || d == "tf32") return 4;
  if (d == "fp64" || d == "int64") return 8;
  return 1;
}

// A size from a value: an exact integer in [0, limit].
inline unsigned long long size(Ctx& c, const Value& v, unsigned long long limit) {
  if (c.failed) return 0;
  long long i = 0;
  if (!as_int(v, &i) || i < 0 || static_cast<unsigned long long>(i) > limit) {
    c.fail("gives " + show(v) + ", not a size");
    return 0;
  }
  return static_cast<unsigned long long>(i);
}

// A launch's `when`: a bool, or a number (0 is false; NaN is no condition).
inline bool when(Ctx& c, const Value& v) {
  if (c.failed) return false;
  switch (v.k) {
    case Value::Bool: return v.b;
    case Value::Int: return v.i != 0;
    case Value::Float:
      if (v.f == v.f) return v.f != 0.0;
      c.fail("gives " + show(v) + ", not a condition");
      return false;
    default:
      c.fail("gives " + show(v) + ", not a condition");
      return false;
  }
}

inline Arg scalar_arg(Ctx& c, const Value& v, ArgKind kind) {
  Arg a;
  a.kind = kind;
  if (c.failed) return a;
  const char* names[] = {"", "", "I32", "I64", "U32", "U64", "F32", "F64"};
  auto bad = [&]() { c.fail("= " + show(v) + " does not fit " + names[kind]); };
  if (kind == ArgF32 || kind == ArgF64) {
    if (!num(v, &a.f)) bad();
    return a;
  }
  long long i = 0;
  if (!as_int(v, &i)) { bad(); return a; }
  if (kind == ArgI32 && (i < -2147483648LL || i > 2147483647LL)) bad();
  if (kind == ArgU32 && (i < 0 || i > 4294967295LL)) bad();
  if (kind == ArgU64 && i < 0) bad();
  a.i = i;
  a.u = static_cast<unsigned long long>(i);
  return a;
}

inline Arg buffer_arg(int index) { Arg a; a.kind = ArgBuffer; a.index = index; return a; }
inline Arg map_arg(int index) { Arg a; a.kind = ArgTensorMap; a.index = index; return a; }

// The checks of a tensor map the driver would refuse (as atrex-tui's harness makes them).
inline void check_tensor_map(Ctx& c, TensorMap& t, bool packed) {
  if (c.failed) return;
  const int r = t.rank;
  if (packed) {
    unsigned long long acc = t.esize;
    for (int n = 0; n + 1 < r; ++n) { acc *= t.dims[n]; t.strides[n] = acc; }
  }
  for (int n = 0; n < r; ++n)
    if (t.dims[n] == 0 || t.dims[n] > (1ULL << 32)) { c.fail("dims: each 1 to 2^32"); return; }
  for (int n = 0; n + 1 < r; ++n)
    if (t.strides[n] % 16 != 0 || t.strides[n] >= (1ULL << 40)) {
      c.fail("strides: each a multiple of 16 below 2^40 (got " + std::to_string(t.strides[n]) + ")");
      return;
    }
  for (int n = 0; n < r; ++n)
    if (t.box[n] == 0 || t.box[n] > 256) { c.fail("box: each 1 to 256"); return; }
  for (int n = 0; n < r; ++n)
    if (t.element_strides[n] == 0 || t.element_strides[n] > 8) { c.fail("element_strides: each 1 to 8"); return; }
  const unsigned long long inner = t.box[0] * t.esize;
  if (t.interleave == 0 && inner % 16 != 0) {
    c.fail("the box's inner dimension is " + std::to_string(inner) + " bytes; it must be a multiple of 16");
    return;
  }
  const unsigned long long span = t.swizzle == 1 ? 32 : t.swizzle == 2 ? 64 : t.swizzle == 3 ? 128 : 0;
  if (span && t.interleave == 0 && inner > span) {
    c.fail("the box's inner dimension is " + std::to_string(inner) + " bytes, more than the " +
           std::to_string(span) + "-byte swizzle span");
    return;
  }
  unsigned long long last = (t.dims[0] - 1) * t.esize;
  for (int n = 1; n < r; ++n) last += (t.dims[n] - 1) * t.strides[n - 1];
  t.extent = last + t.esize;
}

// The checks of a launch (as atrex-tui's harness makes them).
inline void check_launch(Ctx& c, const Launch& L) {
  if (c.failed) return;
  if (L.grid[0] == 0 || L.grid[1] == 0 || L.grid[2] == 0) { c.fail("the grid has a zero dimension"); return; }
  const unsigned long long threads = 1ULL * L.block[0] * L.block[1] * L.block[2];
  if (threads == 0 || threads > 1024) { c.fail("the block has " + std::to_string(threads) + " threads (1 to 1024)"); return; }
  if (L.has_cluster) {
    const unsigned long long n = 1ULL * L.cluster[0] * L.cluster[1] * L.cluster[2];
    if (n == 0 || n > 8) { c.fail("the cluster has " + std::to_string(n) + " blocks (1 to 8)"); return; }
    for (int d = 0; d < 3; ++d)
      if (L.grid[d] % L.cluster[d] != 0) { c.fail("the grid is not a whole number of clusters"); return; }
  }
}

// The workspace's layout: each scratch buffer at a 256-byte aligned offset.
inline void lay_out(Plan& p) {
  unsigned long long off = 0;
  for (Scratch& s : p.scratch) {
    s.offset = off;
    off += (s.bytes + 255) / 256 * 256;
  }
  p.workspace_bytes = off;
}

// The plan as text, one line per launch, argument, scratch buffer and tensor (for logs).
inline std::string describe(const Plan& p) {
  std::ostringstream o;
  for (const Launch& L : p.launches) {
    o << "launch " << L.name << " grid " << L.grid[0] << ' ' << L.grid[1] << ' ' << L.grid[2]
      << " block " << L.block[0] << ' ' << L.block[1] << ' ' << L.block[2] << " smem " << L.smem
      << " cluster ";
    if (L.has_cluster) o << L.cluster[0] << ' ' << L.cluster[1] << ' ' << L.cluster[2];
    else o << "none";
    if (L.cooperative) o << " cooperative";
    o << '\n';
    for (const Arg& a : L.args) {
      switch (a.kind) {
        case ArgBuffer: o << "arg buffer " << a.index << '\n'; break;
        case ArgTensorMap: {
          const TensorMap& t = p.tensor_maps[static_cast<size_t>(a.index)];
          o << "arg map " << t.name << " dims";
          for (int n = 0; n < t.rank; ++n) o << ' ' << t.dims[n];
          o << " strides";
          for (int n = 0; n + 1 < t.rank; ++n) o << ' ' << t.strides[n];
          o << " box";
          for (int n = 0; n < t.rank; ++n) o << ' ' << t.box[n];
          o << " elem";
          for (int n = 0; n < t.rank; ++n) o << ' ' << t.element_strides[n];
          o << '\n';
          break;
        }
        case ArgI32: o << "arg i32 " << a.i << '\n'; break;
        case ArgI64: o << "arg i64 " << a.i << '\n'; break;
        case ArgU32: o << "arg u32 " << a.i << '\n'; break;
        case ArgU64: o << "arg u64 " << a.u << '\n'; break;
        case ArgF32: {
          float x = static_cast<float>(a.f);
          uint32_t bits = 0;
          std::memcpy(&bits, &x, 4);
          o << "arg f32 " << bits << '\n';
          break;
        }
        case ArgF64: {
          uint64_t bits = 0;
          std::memcpy(&bits, &a.f, 8);
          o << "arg f64 " << bits << '\n';
          break;
        }
      }
    }
  }
  for (const Scratch& s : p.scratch) o << "scratch " << s.name << ' ' << s.elements << ' ' << (s.zero ? 1 : 0) << '\n';
  for (const Tensor& t : p.outputs) {
    o << "output " << t.name << ' ' << t.dtype;
    for (long long d : t.dims) o << ' ' << d;
    o << '\n';
  }
  return o.str();
}

// -- launching on a stream -------------------------------------------------------------------

// Encodes a tensor map for a buffer into 128 bytes (64-byte aligned); returns false with a
// message. `encode_tensor_map` (below, with <cuda.h>) is the driver's cuTensorMapEncodeTiled.
typedef bool (*EncodeFn)(void* map, const TensorMap& t, const void* base, std::string* error);

inline cudaError_t fail_launch(cudaError_t e, std::string* error, const std::string& msg) {
  if (error) *error = msg;
  return e;
}

// Launches a resolved plan on `stream`: zeroes the scratch buffers that ask for it, encodes the
// tensor maps, raises the dynamic shared memory limit where a launch needs more than 48 KiB and
// launches every kernel in order (clusters through cudaLaunchKernelExC). `buffers` holds the
// device pointers of the inputs then the outputs; `kernels` the kernel functions by index.
inline cudaError_t launch_plan(const Plan& p, const void* const* buffers, void* workspace,
                               size_t workspace_bytes, cudaStream_t stream,
                               const void* const* kernels, EncodeFn encode, std::string* error) {
  if (workspace_bytes < p.workspace_bytes || (p.workspace_bytes > 0 && workspace == nullptr))
    return fail_launch(cudaErrorInvalidValue, error,
                       "the plan needs a workspace of " + std::to_string(p.workspace_bytes) +
                           " bytes, " + std::to_string(workspace_bytes) + " given");
  std::vector<const void*> ptrs(buffers, buffers + p.inputs.size() + p.outputs.size());
  std::vector<unsigned long long> sizes;
  for (const Tensor& t : p.inputs) sizes.push_back(t.bytes);
  for (const Tensor& t : p.outputs) sizes.push_back(t.bytes);
  for (const Scratch& s : p.scratch) {
    char* at = static_cast<char*>(workspace) + s.offset;
    ptrs.push_back(at);
    sizes.push_back(s.bytes);
    if (s.zero) {
      cudaError_t e = cudaMemsetAsync(at, 0, s.bytes, stream);
      if (e != cudaSuccess) return fail_launch(e, error, "zeroing scratch " + s.name + ": " + cudaGetErrorString(e));
    }
  }
  for (size_t n = 0; n < ptrs.size(); ++n)
    if (ptrs[n] == nullptr && sizes[n] > 0)
      return fail_launch(cudaErrorInvalidValue, error, "buffer " + std::to_string(n) + " is a null pointer");
  struct alignas(64) MapStore { unsigned char bytes[128]; };
  std::vector<MapStore> maps(p.tensor_maps.size());
  for (size_t n = 0; n < p.tensor_maps.size(); ++n) {
    const TensorMap& t = p.tensor_maps[n];
    if (t.skipped) continue;
    if (t.extent > sizes[static_cast<size_t>(t.buffer)])
      return fail_launch(cudaErrorInvalidValue, error,
                         "launch plan line " + std::to_string(t.line) + ": tensor map " + t.name + " reaches " +
                             std::to_string(t.extent) + " bytes of a buffer of " +
                             std::to_string(sizes[static_cast<size_t>(t.buffer)]));
    if (encode == nullptr)
      return fail_launch(cudaErrorInvalidValue, error, "tensor map " + t.name + ": no encoder given");
    std::string why;
    if (!encode(maps[n].bytes, t, ptrs[static_cast<size_t>(t.buffer)], &why))
      return fail_launch(cudaErrorInvalidValue, error,
                         "launch plan line " + std::to_string(t.line) + ": tensor map " + t.name + ": " + why);
  }
  int device = 0, optin = 0;
  for (const Launch& L : p.launches) {
    struct alignas(8) Word { unsigned char bytes[8]; };
    std::vector<Word> words(L.args.size());
    std::vector<void*> params(L.args.size());
    for (size_t n = 0; n < L.args.size(); ++n) {
      const Arg& a = L.args[n];
      unsigned char* w = words[n].bytes;
      std::memset(w, 0, 8);
      switch (a.kind) {
        case ArgBuffer: { const void* v = ptrs[static_cast<size_t>(a.index)]; std::memcpy(w, &v, sizeof v); break; }
        case ArgTensorMap: params[n] = maps[static_cast<size_t>(a.index)].bytes; continue;
        case ArgI32: case ArgU32: { int32_t v = static_cast<int32_t>(static_cast<uint32_t>(a.i)); std::memcpy(w, &v, 4); break; }
        case ArgI64: { int64_t v = a.i; std::memcpy(w, &v, 8); break; }
        case ArgU64: { uint64_t v = a.u; std::memcpy(w, &v, 8); break; }
        case ArgF32: { float v = static_cast<float>(a.f); std::memcpy(w, &v, 4); break; }
        case ArgF64: { double v = a.f; std::memcpy(w, &v, 8); break; }
      }
      params[n] = w;
    }
    const void* fn = kernels[L.kernel];
    const std::string what = "launching " + L.name + " (launch plan line " + std::to_string(L.line) + ")";
    if (L.smem > 48 * 1024) {
      cudaError_t e = cudaGetDevice(&device);
      if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
      if (e != cudaSuccess) return fail_launch(e, error, what + ": " + cudaGetErrorString(e));
      if (L.smem > static_cast<unsigned int>(optin))
        return fail_launch(cudaErrorInvalidValue, error,
                           what + ": " + std::to_string(L.smem) + " bytes of dynamic shared memory asked; this GPU allows " +
                               std::to_string(optin) + " per block");
      e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(L.smem));
      if (e != cudaSuccess) return fail_launch(e, error, what + ": cudaFuncSetAttribute: " + cudaGetErrorString(e));
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(L.grid[0], L.grid[1], L.grid[2]);
    cfg.blockDim = dim3(L.block[0], L.block[1], L.block[2]);
    cfg.dynamicSmemBytes = L.smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1] = {};
    if (L.has_cluster) {
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = L.cluster[0];
      attr[0].val.clusterDim.y = L.cluster[1];
      attr[0].val.clusterDim.z = L.cluster[2];
      cfg.attrs = attr;
      cfg.numAttrs = 1;
    } else if (L.cooperative) {
      attr[0].id = cudaLaunchAttributeCooperative;
      attr[0].val.cooperative = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
    }
    cudaError_t e = cudaLaunchKernelExC(&cfg, fn, params.data());
    if (e != cudaSuccess) return fail_launch(e, error, what + ": " + cudaGetErrorString(e));
  }
  return cudaSuccess;
}

}  // namespace atrex_export_rt

#endif  // ATREX_EXPORT_RUNTIME_HPP

// The tensor-map encoder: needs <cuda.h> and the driver library (-lcuda). Defined where the
// including file asks for it (ATREX_EXPORT_TENSOR_MAPS), once per translation unit.
#if defined(ATREX_EXPORT_TENSOR_MAPS) && !defined(ATREX_EXPORT_TENSOR_MAPS_DEFINED)
#define ATREX_EXPORT_TENSOR_MAPS_DEFINED
#include <cuda.h>
namespace atrex_export_rt {
inline bool encode_tensor_map(void* map, const TensorMap& t, const void* base, std::string* error) {
  CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  if (t.dtype == "u16" || t.dtype == "i16") dtype = CU_TENSOR_MAP_DATA_TYPE_UINT16;
  else if (t.dtype == "fp16") dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  else if (t.dtype == "bf16") dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  else if (t.dtype == "u32") dtype = CU_TENSOR_MAP_DATA_TYPE_UINT32;
  else if (t.dtype == "i32") dtype = CU_TENSOR_MAP_DATA_TYPE_INT32;
  else if (t.dtype == "fp32") dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  else if (t.dtype == "u64") dtype = CU_TENSOR_MAP_DATA_TYPE_UINT64;
  else if (t.dtype == "i64") dtype = CU_TENSOR_MAP_DATA_TYPE_INT64;
  else if (t.dtype == "fp64") dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], elem[5];
  for (int n = 0; n < t.rank; ++n) {
    dims[n] = t.dims[n];
    box[n] = t.box[n];
    elem[n] = t.element_strides[n];
    if (n + 1 < t.rank) strides[n] = t.strides[n];
  }
  CUresult r = cuTensorMapEncodeTiled(
      static_cast<CUtensorMap*>(map), dtype, static_cast<cuuint32_t>(t.rank), const_cast<void*>(base), dims,
      strides, box, elem, static_cast<CUtensorMapInterleave>(t.interleave),
      static_cast<CUtensorMapSwizzle>(t.swizzle), static_cast<CUtensorMapL2promotion>(t.l2_promotion),
      static_cast<CUtensorMapFloatOOBfill>(t.oob_fill));
  if (r != CUDA_SUCCESS) {
    const char* s = nullptr;
    cuGetErrorString(r, &s);
    if (error) *error = std::string("cuTensorMapEncodeTiled: ") + (s ? s : "unknown error");
    return false;
  }
  return true;
}
}  // namespace atrex_export_rt
#endif
