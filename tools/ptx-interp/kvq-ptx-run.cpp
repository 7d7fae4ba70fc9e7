//===- kvq-ptx-run.cpp - Run a PTX kernel in the interpreter --------------===//
//
// Loads a PTX file, creates device buffers from files, literal values or
// zeros, launches one kernel in the PTX interpreter and writes or prints
// buffers afterwards. Intended for lit tests and for debugging kernels that
// kvq-opt emits.
//
//===----------------------------------------------------------------------===//

#include "kvq/PTXInterp/InterpDriver.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

using namespace kvq::ptx;

namespace {

const char *const Usage = R"(usage: kvq-ptx-run FILE.ptx --kernel NAME [options]

Runs one kernel of a PTX module in kvq's PTX interpreter.

Launch:
  --kernel NAME            the .entry to launch (required)
  --grid X[,Y[,Z]]         grid dimensions (default 1)
  --block X[,Y[,Z]]        block dimensions (default 1)
  --shared BYTES           dynamic shared memory per block (default 0)
  --limit N                stop after N warp instructions (default 2^31)

Buffers (device allocations, named for --arg ptr:NAME):
  --buf NAME=FILE          contents of FILE
  --buf-zero NAME=BYTES    BYTES zero bytes
  --buf-values NAME=T:V,V  the listed values of type T (u8..u64, s8..s64,
                           f32, f64, or b16/b32/b64 in hex)
  --buf-iota NAME=T:N      the values 0, 1, ..., N-1 of type T

Arguments, in parameter order:
  --arg ptr:NAME           device address of buffer NAME
  --arg T:VALUE            a scalar of type T (u8..u64, s8..s64, f32, f64)

After the launch:
  --dump NAME=FILE         write buffer NAME to FILE
  --print NAME:T           print buffer NAME as values of type T, one per line
  --counters               print the launch counters (load waits included)

Exit status: 0 on success, 1 on any error (the message names the kernel,
PTX line, instruction and thread where execution stopped).
)";

[[noreturn]] void die(const std::string &Msg) {
  std::cerr << "kvq-ptx-run: error: " << Msg << "\n";
  std::exit(1);
}

kvq::runtime::Dim3 parseDim(const std::string &S) {
  kvq::runtime::Dim3 D;
  unsigned V[3] = {1, 1, 1};
  std::stringstream SS(S);
  std::string Part;
  for (int I = 0; I < 3 && std::getline(SS, Part, ','); ++I)
    V[I] = static_cast<unsigned>(std::stoul(Part));
  D.X = V[0];
  D.Y = V[1];
  D.Z = V[2];
  return D;
}

/// Appends the bytes of Text parsed as a value of type T.
void appendValue(std::vector<uint8_t> &Out, const std::string &T,
                 const std::string &Text) {
  uint8_t Bytes[8];
  unsigned Size;
  if (T == "f32") {
    float F = std::stof(Text);
    std::memcpy(Bytes, &F, Size = 4);
  } else if (T == "f64") {
    double D = std::stod(Text);
    std::memcpy(Bytes, &D, Size = 8);
  } else if (T.size() >= 2 && (T[0] == 'u' || T[0] == 's' || T[0] == 'b')) {
    Size = std::stoul(T.substr(1)) / 8;
    if (Size != 1 && Size != 2 && Size != 4 && Size != 8)
      die("bad type '" + T + "'");
    uint64_t V = T[0] == 's'
                     ? static_cast<uint64_t>(std::stoll(Text, nullptr, 0))
                     : std::stoull(Text, nullptr, T[0] == 'b' ? 16 : 0);
    std::memcpy(Bytes, &V, Size);
  } else {
    die("bad type '" + T + "'");
  }
  Out.insert(Out.end(), Bytes, Bytes + Size);
}

std::string formatValue(const uint8_t *P, const std::string &T) {
  std::ostringstream OS;
  if (T == "f32") {
    float F;
    std::memcpy(&F, P, 4);
    OS.precision(9);
    OS << F;
  } else if (T == "f64") {
    double D;
    std::memcpy(&D, P, 8);
    OS.precision(17);
    OS << D;
  } else {
    unsigned Size = std::stoul(T.substr(1)) / 8;
    uint64_t V = 0;
    std::memcpy(&V, P, Size);
    if (T[0] == 's') {
      int64_t S = static_cast<int64_t>(V << (64 - 8 * Size)) >> (64 - 8 * Size);
      OS << S;
    } else if (T[0] == 'b') {
      OS << "0x" << std::hex << V;
    } else {
      OS << V;
    }
  }
  return OS.str();
}

unsigned typeSize(const std::string &T) {
  if (T == "f32")
    return 4;
  if (T == "f64")
    return 8;
  if (T.size() < 2 || !std::strchr("usb", T[0]))
    die("bad type '" + T + "'");
  return std::stoul(T.substr(1)) / 8;
}

std::pair<std::string, std::string> splitAt(const std::string &S, char C) {
  size_t P = S.find(C);
  if (P == std::string::npos)
    die("expected '" + std::string(1, C) + "' in '" + S + "'");
  return {S.substr(0, P), S.substr(P + 1)};
}

std::string readFile(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  if (!In)
    die("cannot read '" + Path + "'");
  std::ostringstream OS;
  OS << In.rdbuf();
  return OS.str();
}

} // namespace

int main(int Argc, char **Argv) {
  std::string File, Kernel;
  kvq::runtime::Dim3 Grid, Block;
  unsigned SharedBytes = 0;
  uint64_t Limit = 1ull << 31;
  bool ShowCounters = false;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> Buffers;
  std::vector<std::string> Args, Dumps, Prints;
  for (int I = 1; I < Argc; ++I) {
    std::string A = Argv[I];
    auto Next = [&]() -> std::string {
      if (I + 1 >= Argc)
        die("missing value for " + A);
      return Argv[++I];
    };
    if (A == "--help" || A == "-h") {
      std::cout << Usage;
      return 0;
    }
    if (A == "--kernel") {
      Kernel = Next();
    } else if (A == "--grid") {
      Grid = parseDim(Next());
    } else if (A == "--block") {
      Block = parseDim(Next());
    } else if (A == "--shared") {
      SharedBytes = std::stoul(Next());
    } else if (A == "--limit") {
      Limit = std::stoull(Next());
    } else if (A == "--counters") {
      ShowCounters = true;
    } else if (A == "--buf") {
      auto [Name, Path] = splitAt(Next(), '=');
      std::string Data = readFile(Path);
      Buffers.push_back({Name, std::vector<uint8_t>(Data.begin(), Data.end())});
    } else if (A == "--buf-zero") {
      auto [Name, Size] = splitAt(Next(), '=');
      Buffers.push_back({Name, std::vector<uint8_t>(std::stoull(Size), 0)});
    } else if (A == "--buf-values" || A == "--buf-iota") {
      auto [Name, Spec] = splitAt(Next(), '=');
      auto [Ty, Values] = splitAt(Spec, ':');
      std::vector<uint8_t> Data;
      if (A == "--buf-iota") {
        for (uint64_t K = 0, N = std::stoull(Values); K < N; ++K)
          appendValue(Data, Ty, std::to_string(K));
      } else {
        std::stringstream SS(Values);
        std::string V;
        while (std::getline(SS, V, ','))
          appendValue(Data, Ty, V);
      }
      Buffers.push_back({Name, std::move(Data)});
    } else if (A == "--arg") {
      Args.push_back(Next());
    } else if (A == "--dump") {
      Dumps.push_back(Next());
    } else if (A == "--print") {
      Prints.push_back(Next());
    } else if (!A.empty() && A[0] == '-') {
      die("unknown option '" + A + "' (see --help)");
    } else {
      File = A;
    }
  }
  if (File.empty() || Kernel.empty())
    die("a PTX file and --kernel are required (see --help)");

  InterpDriver Driver;
  Driver.setInstructionLimit(Limit);
  Driver.setCountLoadWaits(ShowCounters);
  auto Mod = Driver.loadModule(readFile(File));
  if (!Mod.ok())
    die(Mod.message());
  auto K = Driver.getKernel(*Mod, Kernel);
  if (!K.ok())
    die(K.message());

  std::map<std::string, std::pair<uint64_t, size_t>> Addr;
  for (auto &[Name, Data] : Buffers) {
    auto P = Driver.allocate(Data.size());
    if (!P.ok())
      die(P.message());
    if (Status S = Driver.copyToDevice(*P, Data.data(), Data.size()); !S.ok())
      die(S.message());
    Addr[Name] = {*P, Data.size()};
  }

  const Function *Fn = Driver.module(*Mod)->findFunction(Kernel);
  if (Args.size() != Fn->Params.size())
    die("kernel '" + Kernel + "' has " + std::to_string(Fn->Params.size()) +
        " parameters, " + std::to_string(Args.size()) + " --arg given");
  std::vector<std::vector<uint8_t>> Values(Args.size());
  std::vector<void *> Pointers;
  for (size_t I = 0; I < Args.size(); ++I) {
    auto [Ty, Text] = splitAt(Args[I], ':');
    if (Ty == "ptr") {
      auto It = Addr.find(Text);
      if (It == Addr.end())
        die("no buffer named '" + Text + "'");
      appendValue(Values[I], "u64", std::to_string(It->second.first));
    } else {
      appendValue(Values[I], Ty, Text);
    }
    if (Values[I].size() != Fn->Params[I].Size)
      die("argument " + std::to_string(I) + " ('" + Args[I] + "') has " +
          std::to_string(Values[I].size()) + " bytes but parameter '" +
          Fn->Params[I].Name + "' has " + std::to_string(Fn->Params[I].Size));
    Pointers.push_back(Values[I].data());
  }

  Status S = Driver.launch(*K, Grid, Block, SharedBytes, Pointers.data());
  if (ShowCounters)
    std::cout << Driver.lastCounters().format();
  if (!S.ok())
    die(S.message());

  // The contents of the named buffer, read back from the device.
  auto ReadBuffer = [&](const std::string &Name) {
    auto It = Addr.find(Name);
    if (It == Addr.end())
      die("no buffer named '" + Name + "'");
    std::vector<uint8_t> Data(It->second.second);
    if (Status R =
            Driver.copyToHost(Data.data(), It->second.first, Data.size());
        !R.ok())
      die(R.message());
    return Data;
  };
  for (const std::string &D : Dumps) {
    auto [Name, Path] = splitAt(D, '=');
    std::vector<uint8_t> Data = ReadBuffer(Name);
    std::ofstream Out(Path, std::ios::binary);
    Out.write(reinterpret_cast<const char *>(Data.data()), Data.size());
    if (!Out)
      die("cannot write '" + Path + "'");
  }
  for (const std::string &P : Prints) {
    auto [Name, Ty] = splitAt(P, ':');
    std::vector<uint8_t> Data = ReadBuffer(Name);
    unsigned Size = typeSize(Ty);
    for (size_t K2 = 0; K2 + Size <= Data.size(); K2 += Size)
      std::cout << Name << "[" << K2 / Size
                << "] = " << formatValue(Data.data() + K2, Ty) << "\n";
  }
  return 0;
}
