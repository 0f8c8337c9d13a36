/* cpu.cpp: the CPU code is generated for (cg_options.cpu): whether LLVM
 * knows a CPU name, how wide its vectors are, and whether this host can run
 * code made for it.
 *
 * "native" (or NULL) is the host's CPU with the features the host reports;
 * any other name is a CPU of LLVM's native target (an -mcpu name such as
 * x86-64-v3, znver3 or skylake-avx512) with that CPU's own features, whatever
 * the host has, so an AVX-512 machine can build and test the AVX2 code.
 *
 * This is one of revc's two C++ files (distinct.cpp is the other): the LLVM
 * C API can make a target machine for a CPU name but cannot list the names
 * (LLVMCreateTargetMachine only warns on stderr about an unknown one) nor
 * say which features a CPU has.  The MC layer's subtarget tables can,
 * without printing anything.  Of revc it includes only cpu.h, which is C and
 * C++ alike.
 * Nothing here throws (LLVM is built without exceptions); subtarget infos
 * are owned here and freed before returning. */
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include <llvm/ADT/StringMap.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "cpu.h"

using namespace llvm;

bool cg_cpu_is_native(const char *cpu)
{
	return !cpu || std::strcmp(cpu, "native") == 0;
}

void cg_cpu_target(const char *cpu, char **name, char **features)
{
	bool native = cg_cpu_is_native(cpu);
	*name = native ? LLVMGetHostCPUName() : LLVMCreateMessage(cpu);
	*features = native ? LLVMGetHostCPUFeatures() : LLVMCreateMessage("");
}

/* The subtarget of a CPU name known to be valid (the host's when native,
 * with the host's features), or null when there is no native target. */
static std::unique_ptr<MCSubtargetInfo> subtarget(const char *cpu)
{
	cg_init_native();
	std::string triple = sys::getDefaultTargetTriple(), err;
	const Target *t = TargetRegistry::lookupTarget(triple, err);
	if (!t)
		return nullptr;
	char *name, *features;
	cg_cpu_target(cpu, &name, &features);
	std::unique_ptr<MCSubtargetInfo> sti(t->createMCSubtargetInfo(triple, name, features));
	LLVMDisposeMessage(name);
	LLVMDisposeMessage(features);
	return sti;
}

/* Whether sti has the feature named (false for a name its target lacks). */
static bool has(const MCSubtargetInfo &sti, StringRef name)
{
	for (const SubtargetFeatureKV &f : sti.getAllProcessorFeatures())
		if (name == f.Key)
			return sti.hasFeature(f.Value);
	return false;
}

bool cg_cpu_known(const char *cpu)
{
	if (cg_cpu_is_native(cpu))
		return true;
	/* Asked of the generic subtarget: making one for an unknown name would
	 * print a warning. */
	std::unique_ptr<MCSubtargetInfo> generic = subtarget("");
	if (!generic || !generic->isCPUStringValid(cpu))
		return false;
	/* A 32-bit CPU (i386, pentium4) cannot take 64-bit code: LLVM would
	 * abort on it. */
	bool wide = Triple(sys::getDefaultTargetTriple()).isArch64Bit();
	return !wide || !has(*generic, "64bit") || has(*subtarget(cpu), "64bit");
}

/* The features the code generator uses without intrinsics (revc calls
 * none): vector (sse*, ssse3, avx*, fma*, f16c, xop), bit manipulation,
 * cmov, cx16, movbe, sahf and 64-bit mode.  The others a CPU has (pku,
 * sgx, cldemote, rdrnd, ...) only matter to code that asks for them, and a
 * host may not report some of them at all: a virtual machine without
 * protection keys still runs znver3 code. */
static bool used_by_codegen(StringRef f)
{
	static const char *const prefix[] = {"sse", "ssse3", "avx", "fma", "f16c", "xop", "bmi", "lzcnt", "popcnt",
		"tbm", "cmov", "cx16", "movbe", "sahf", "64bit", "evex512"};
	for (const char *p : prefix)
		if (f.starts_with(p))
			return true;
	return false;
}

bool cg_cpu_runs_here(const char *cpu, char *missing, size_t len)
{
	if (cg_cpu_is_native(cpu))
		return true;
	std::unique_ptr<MCSubtargetInfo> sti = subtarget(cpu);
	if (!sti)
		return true; /* no native target: compiling will say so */
	/* The host lists every instruction-set feature it can detect, with
	 * the ones it lacks as false; tuning features never appear there. */
	for (const auto &f : sys::getHostCPUFeatures())
		if (!f.second && used_by_codegen(f.first()) && has(*sti, f.first())) {
			std::snprintf(missing, len, "%s", f.first().str().c_str());
			return false;
		}
	return true;
}

void cg_host_cpu(char *buf, size_t len)
{
	std::snprintf(buf, len, "%s", sys::getHostCPUName().str().c_str());
}

int cg_cpu_vector_bytes(const char *cpu)
{
	std::unique_ptr<MCSubtargetInfo> sti = subtarget(cpu);
	if (!sti)
		return 32; /* no native target: nothing will be compiled */
	return has(*sti, "avx512f") ? 64 : has(*sti, "avx") ? 32 : 16;
}
