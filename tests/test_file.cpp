// The one file reader: only regular files, a size cap, and the kind of a file told from its
// bytes, so a wrong file is named as what it is.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "io/file.h"
#include "test_util.h"
#include "volta/checkpoint.h"
#include "volta/text.h"

namespace volta {
namespace {

std::string temp(const std::string& name) { return ::testing::TempDir() + "file_" + std::to_string(::getpid()) + "_" + name; }

TEST(FileRead, OnlyRegularFilesAreRead) {
  // A FIFO with no writer would block a plain open forever; a device streams without end.
  const std::string fifo = temp("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_ERROR_CONTAINS(io::read_file(fifo, {1 << 20, "--data"}), "--data: '" + fifo + "' is a FIFO, not a regular file");
  std::remove(fifo.c_str());
  EXPECT_ERROR_CONTAINS(io::read_file("/dev/zero", {1 << 20, ""}), "'/dev/zero' is a character device, not a regular file");
  EXPECT_ERROR_CONTAINS(io::read_file("/tmp", {1 << 20, ""}), "'/tmp' is a directory");
  // A symlink to a device is the device.
  const std::string link = temp("link");
  std::filesystem::create_symlink("/dev/zero", link);
  EXPECT_ERROR_CONTAINS(io::load_checkpoint(link), "is a character device");
  EXPECT_ERROR_CONTAINS(ir::load_graph(link), "is a character device");
  std::remove(link.c_str());
  EXPECT_ERROR_CONTAINS(io::read_file(temp("missing"), {1 << 20, "--data"}), "--data: cannot open '");
}

TEST(FileRead, SizeIsCappedPerFormat) {
  const std::string f = temp("big");
  std::ofstream(f) << std::string(100, 'x');
  EXPECT_ERROR_CONTAINS(io::read_file(f, {64, ""}), "has 100 bytes, more than the 64 this kind of file may have");
  ASSERT_OK_AND_ASSIGN(std::string all, io::read_file(f, {100, ""}));
  EXPECT_EQ(all, std::string(100, 'x'));
  std::remove(f.c_str());
}

TEST(FileRead, AFileOfTheWrongKindIsNamedAsWhatItIs) {
  io::Checkpoint c;
  c.tensors.emplace("w", Tensor::zeros(DType::f32, {2}));
  const std::string ck = temp("ck.safetensors"), vir = temp("m.vir"), npy = temp("t.NPY"), onnx = temp("m.onnx");
  ASSERT_OK(io::save_checkpoint(c, ck));
  std::ofstream(vir) << "# a model\ngraph g {\n  %x: f32[2] = input()\n  return %x\n}\n";
  std::ofstream(npy, std::ios::binary) << std::string("\x93NUMPY\x01\x00", 8) << "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  // The first bytes of a ModelProto: ir_version = 8 (field 1, varint), then the opset import.
  std::ofstream(onnx, std::ios::binary) << std::string("\x08\x08\x12\x07pytorch\x3a\x02\x10\x11", 15);
  EXPECT_EQ(io::detect_file_kind(test::read_file(ck)), io::FileKind::Checkpoint);
  EXPECT_EQ(io::detect_file_kind(test::read_file(vir)), io::FileKind::IrText);
  EXPECT_EQ(io::detect_file_kind(test::read_file(npy)), io::FileKind::Npy);
  EXPECT_EQ(io::detect_file_kind(test::read_file(onnx)), io::FileKind::Onnx);
  EXPECT_EQ(io::detect_file_kind("plain words\n"), io::FileKind::Text);
  EXPECT_ERROR_CONTAINS(io::load_checkpoint(onnx), "is an ONNX / protobuf file, not a Volta checkpoint (safetensors)");
  EXPECT_ERROR_CONTAINS(io::load_checkpoint(vir), "is a Volta model (IR text), not a Volta checkpoint");
  EXPECT_ERROR_CONTAINS(io::load_checkpoint(npy), "is a NumPy .npy file, not a Volta checkpoint");
  EXPECT_ERROR_CONTAINS(ir::load_graph(ck), "is a Volta checkpoint (safetensors), not a Volta model (IR text)");
  ASSERT_OK(ir::load_graph(vir));
  for (const std::string& f : {ck, vir, npy, onnx}) std::remove(f.c_str());
}

// An output flag replaces an existing file only when it holds what the flag writes: a log, a
// trace or an export never lands on a checkpoint, a model or a corpus given by mistake.
TEST(FileWrite, AnOutputReplacesOnlyAFileOfItsOwnKind) {
  io::Checkpoint c;
  c.tensors.emplace("w", Tensor::zeros(DType::f32, {2}));
  const std::string ck = temp("out.safetensors"), txt = temp("corpus.txt"), log = temp("log.jsonl"), empty = temp("empty"),
                    onnx = temp("out.onnx"), fresh = temp("not_yet");
  ASSERT_OK(io::save_checkpoint(c, ck));
  std::ofstream(txt) << "First Citizen:\nBefore we proceed any further, hear me speak.\n";
  std::ofstream(log) << "  {\"step\": 1}\n";
  std::ofstream(empty) << "";
  std::ofstream(onnx, std::ios::binary) << std::string("\x08\x08\x12\x07pytorch\x3a\x02\x10\x11", 15);
  const std::string ck_bytes = test::read_file(ck), txt_bytes = test::read_file(txt);
  EXPECT_ERROR_CONTAINS(io::check_output_path(ck, "--log", {}, io::Writes::Json),
                        "--log: '" + ck + "' exists and is a Volta checkpoint (safetensors), not the JSON this flag writes: refusing");
  EXPECT_ERROR_CONTAINS(io::check_output_path(txt, "--profile", {}, io::Writes::Json), "exists and is a text file, not the JSON");
  EXPECT_ERROR_CONTAINS(io::check_output_path(txt, "--onnx", {}, io::Writes::Onnx), "is a text file, not an ONNX model");
  EXPECT_ERROR_CONTAINS(io::check_output_path(onnx, "--safetensors", {}, io::Writes::Checkpoint),
                        "is an ONNX / protobuf file, not a Volta checkpoint");
  EXPECT_ERROR_CONTAINS(io::check_output_path(ck, "--onnx", {}, io::Writes::Onnx), "is a Volta checkpoint (safetensors), not an ONNX");
  ASSERT_OK(io::check_output_path(log, "--log", {}, io::Writes::Json));
  ASSERT_OK(io::check_output_path(empty, "--log", {}, io::Writes::Json));
  ASSERT_OK(io::check_output_path(fresh, "--log", {}, io::Writes::Json));
  ASSERT_OK(io::check_output_path(onnx, "--onnx", {}, io::Writes::Onnx));
  ASSERT_OK(io::check_output_path(ck, "--safetensors", {}, io::Writes::Checkpoint));
  ASSERT_OK(io::check_output_path(txt, "--output", {}, io::Writes::Any));
  EXPECT_EQ(test::read_file(ck), ck_bytes);
  EXPECT_EQ(test::read_file(txt), txt_bytes);
  // Text that only starts like JSON, archives and Latin-1 text whose first byte passes for a
  // protobuf key are not what these flags write; a profile longer than the 4 KiB looked at is.
  const std::string toml = temp("Cargo.toml"), badge = temp("README.md"), zip = temp("weights.pt"), latin = temp("notes.txt"),
                    profile = temp("profile.json");
  std::ofstream(toml) << "[package]\nname = \"x\"\n";
  std::ofstream(badge) << "[![build](https://example.org/badge.svg)](https://example.org)\n";
  std::ofstream(zip, std::ios::binary) << std::string("PK\x03\x04\x14\x00\x00\x00", 8);
  std::ofstream(latin, std::ios::binary) << "b\xe9t\xe9 d\xe9j\xe0\n";
  std::ofstream(profile) << "{\"traceEvents\": [" << std::string(8000, ' ') << "{\"name\": \"x\"}]}\n";
  const std::string dated = temp("dated.txt"), numbers = temp("numbers.csv"), word = temp("story.txt"), cut = temp("cut.jsonl");
  std::ofstream(dated) << "2024-01-01 started the run\n";
  std::ofstream(numbers) << "1,2,3\n";
  std::ofstream(word) << "true story\n";
  std::ofstream(cut) << "{\"step\":1,\"train_loss\":4.1";  // a log's first line cut by a full disk
  for (const std::string& f : {dated, numbers, word})
    EXPECT_ERROR_CONTAINS(io::check_output_path(f, "--profile", {}, io::Writes::Json), "is a text file, not the JSON");
  ASSERT_OK(io::check_output_path(cut, "--log", {}, io::Writes::Json));
  EXPECT_ERROR_CONTAINS(io::check_output_path(toml, "--profile", {}, io::Writes::Json), "is a text file, not the JSON");
  EXPECT_ERROR_CONTAINS(io::check_output_path(badge, "--log", {}, io::Writes::Json), "is a text file, not the JSON");
  EXPECT_ERROR_CONTAINS(io::check_output_path(zip, "--onnx", {}, io::Writes::Onnx), "is a binary file, not an ONNX model");
  EXPECT_ERROR_CONTAINS(io::check_output_path(zip, "--safetensors", {}, io::Writes::Checkpoint), "is a binary file, not a Volta");
  EXPECT_ERROR_CONTAINS(io::check_output_path(latin, "--onnx", {}, io::Writes::Onnx), "is a binary file, not an ONNX model");
  ASSERT_OK(io::check_output_path(profile, "--profile", {}, io::Writes::Json));
  for (const std::string& f : {ck, txt, log, empty, onnx, toml, badge, zip, latin, profile, dated, numbers, word, cut})
    std::remove(f.c_str());
}

// A symlink is written through to its target, also one whose target is not written yet (the
// rename replaced the link with a file and left the target unwritten); a loop of links is named
// before the work, and a link into a missing directory is refused as that directory.
TEST(FileWrite, OutputsGoThroughSymlinks) {
  const std::string dir = temp("links");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/tgt");
  std::filesystem::create_symlink("tgt/t.json", dir + "/dangling");
  std::filesystem::create_symlink("dangling", dir + "/chain");
  ASSERT_EQ(io::link_target(dir + "/chain").value(), dir + "/tgt/t.json");
  ASSERT_OK(io::write_output(dir + "/chain", "{}\n"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/dangling"));
  EXPECT_EQ(test::read_file(dir + "/tgt/t.json"), "{}\n");
  ASSERT_OK(io::write_file_atomic(dir + "/dangling", "[]\n"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/dangling"));
  EXPECT_EQ(test::read_file(dir + "/tgt/t.json"), "[]\n");
  std::filesystem::create_symlink("loop2", dir + "/loop1");
  std::filesystem::create_symlink("loop1", dir + "/loop2");
  EXPECT_ERROR_CONTAINS(io::check_output_path(dir + "/loop1", "--profile", {}, io::Writes::Json),
                        "--profile: '" + dir + "/loop1' is a loop of symlinks");
  EXPECT_ERROR_CONTAINS(io::write_output(dir + "/loop1", "{}"), "is a loop of symlinks");
  std::filesystem::create_symlink("/nonexistent-volta-dir/p.onnx", dir + "/away");
  EXPECT_ERROR_CONTAINS(io::check_parent_dir(dir + "/away", "--onnx"), "there is no directory '/nonexistent-volta-dir'");
  std::filesystem::remove_all(dir);
}

// A file replaced keeps its permission bits (it was written anew with the umask's mode).
TEST(FileWrite, AReplacedFileKeepsItsMode) {
  const std::string path = temp("mode.json");
  std::remove(path.c_str());
  ASSERT_OK(io::write_file_atomic(path, "{}\n"));
  for (const mode_t mode : {mode_t{0600}, mode_t{0640}, mode_t{0444}}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    ASSERT_OK(io::write_file_atomic(path, "[]\n"));
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, mode);
    EXPECT_EQ(st.st_uid, ::geteuid());
    EXPECT_EQ(test::read_file(path), "[]\n");
  }
  std::remove(path.c_str());
}

// A FIFO output with a reader that reads once (`cat fifo`): the check before the work must not
// hand the reader its end of file, or the output's open would then wait for a reader forever.
TEST(FileWrite, AFifoOutputKeepsItsReader) {
  const std::string fifo = temp("out.fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_ERROR_CONTAINS(io::check_output_path(fifo, "--profile", {}, io::Writes::Json), "is a FIFO that nothing reads");
  std::string got;
  std::thread reader([&] {
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    char buf[64];
    for (ssize_t n; got.size() < 8 && (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    ::close(fd);
  });
  while (!io::check_output_path(fifo, "--profile", {}, io::Writes::Json).is_ok()) std::this_thread::yield();  // the reader is there
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a closed check would have ended its read by now
  ASSERT_OK(io::write_output(fifo, "{\"a\": 1}"));
  reader.join();
  EXPECT_EQ(got, "{\"a\": 1}");
  std::remove(fifo.c_str());
}

}  // namespace
}  // namespace volta
