//===- moe-serve.cpp - an OpenAI-compatible server for a plan -------------===//
//
//   moe-serve PLAN [--host 127.0.0.1] [--port 8000] [--api-key-file FILE]
//   mpirun -np N moe-serve PLAN ...
//
// Loads the plan, checks its weights' checksums as their pages come in
// (unless --no-verify-weights; /health is 503 until they match), starts the
// engine on its own thread (EngineService) and serves it over HTTP (the
// moe_serve library). SIGTERM or SIGINT: stop admitting, let the running
// requests finish for --grace seconds, cancel the rest, and report what
// was cancelled.
//
// Under mpirun (a plan compiled with --ep/--tp) every rank loads its part
// and runs an engine; rank 0 alone listens and sends the others what its
// engine is handed before each step (moe/runtime/ServiceEvents.h). Any
// rank's failure, or a peer that stops answering for --collective-timeout,
// ends the in-flight requests with an error and every rank with a non-zero
// status; SIGTERM there ends the job at once (the launcher sends it when a
// rank died), as the ranks cannot drain without each other.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/ChatTemplate.h"
#include "moe/runtime/EngineService.h"
#include "moe/abi/File.h"
#include "moe/runtime/Plan.h"
#include "moe/runtime/Registry.h"
#include "moe/serve/Server.h"
#include "tools/common/Cli.h"
#include "tools/common/EngineFlags.h"
#include "tools/common/ModelName.h"
#include "tools/common/Ranks.h"
#include "tools/common/RuntimeFlags.h"

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <pthread.h>
#include <thread>

using namespace moe;

namespace {

struct Flags {
  std::string planDir, modelName, apiKeyFile, portFile, chatTemplate, device = "cpu", prefault;
  tools::EngineFlags engine;
  serve::ServeOptions serve;
  double maxBodyMiB = 1, pricePerHour = 0, grace = 30, headerTimeout = 10, bodyTimeout = 30,
         keepAlive = 5;
  int64_t maxPromptTokens = 0, maxOpenConnections = 1024;
  bool prefixCaching = false, noVerifyWeights = false;
  int threads = 0;
  double collectiveTimeout = rt::kDefaultCollectiveDeadline.count() / 1000.0;
};

void note(const std::string &line) { std::fprintf(stderr, "moe-serve: %s\n", line.c_str()); }

/// The model's name in requests: --model-name, else the plan directory's.
std::string modelName(const Flags &f) {
  if (!f.modelName.empty())
    return f.modelName;
  return tools::planModelName(f.planDir);
}

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(int64_t(seconds * 1e3));
}

/// Room for --max-open-connections descriptors (and the plan's and the
/// engine's); the soft limit is raised to the hard one if need be.
void raiseDescriptorLimit(int64_t connections) {
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) != 0)
    return;
  const rlim_t want = rlim_t(connections) + 256;
  if (l.rlim_cur >= want)
    return;
  l.rlim_cur = std::min(want, l.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &l);
  if (l.rlim_cur < want)
    note("warning: the descriptor limit (ulimit -n " + std::to_string(l.rlim_max) +
         ") is below --max-open-connections + 256; beyond it idle connections are closed "
         "to make room");
}

/// The weights' check as /health and generation requests see it.
serve::Readiness readiness(const rt::LoadedPlan &plan, bool verifying) {
  serve::Readiness r;
  if (!verifying)
    return r;
  rt::PrefaultProgress p = plan.prefault();
  r.verifiedBytes = p.verified;
  r.totalBytes = p.weightBytes;
  if (p.weightsVerified())
    return r;
  if (p.state == rt::PrefaultProgress::State::Running) {
    r.state = serve::Readiness::State::Loading;
    r.detail = std::to_string(p.weightBytes ? 100 * p.verified / p.weightBytes : 0) +
               "% of the weights verified";
    return r;
  }
  r.state = serve::Readiness::State::Failed;
  r.detail = p.error.empty() ? std::string("the check stopped: ") + prefaultStateName(p.state)
                             : p.error;
  return r;
}

int serveMain(Flags &f, tools::Cli &cli) {
  // Every thread started from here on (MPI's too) leaves SIGTERM and SIGINT
  // to the one that waits for them: rank 0's. The other ranks' main thread
  // takes them back below and ends at once, as MpiCollective.h says.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGTERM);
  sigaddset(&stopSignals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);
  auto job = tools::joinJob("moe-serve", f.collectiveTimeout);
  if (!job)
    return cli.fail(job.status().message());
  rt::Collective &ranks = **job;
  const bool leader = ranks.rank() == 0, several = ranks.size() > 1;
  // From here a failing rank leaves the job without waiting for the others.
  auto fail = [&](const std::string &m) {
    ranks.abandon();
    const std::string self = "rank " + std::to_string(ranks.rank()) + ": ";
    return cli.fail(several && m.rfind(self, 0) != 0 ? self + m : m);
  };
  if (!leader)
    pthread_sigmask(SIG_UNBLOCK, &stopSignals, nullptr);
  std::signal(SIGPIPE, SIG_IGN); // a client gone mid-write is an error return, not a signal

  auto device = rt::createDevice(f.device, {f.threads});
  if (!device)
    return fail(device.status().message());
  rt::LoadOptions loadOptions;
  loadOptions.prefault = tools::prefaultMode(f.prefault);
  const bool verify = !f.noVerifyWeights;
  if (verify && loadOptions.prefault == rt::Prefault::Off)
    return fail("--prefault off pages nothing in, so nothing checks the weights; use "
                "--prefault background or sync, or --no-verify-weights");
  if (several) {
    // Only rank 0 answers /health: every rank checks its weights before
    // the job starts instead.
    loadOptions.rank = ranks.rank();
    loadOptions.verifyWeights = verify;
  } else {
    loadOptions.verifyWhilePrefaulting = verify;
  }
  auto plan = rt::LoadedPlan::open(f.planDir, loadOptions);
  if (!plan)
    return fail(plan.status().message());
  const plan::Plan &p = (*plan)->plan();
  if (rt::Status st = tools::agreeOnPlan(ranks, **plan, **device); !st)
    return fail(st.message());
  auto tokenizer = rt::Tokenizer::forPlan(p);
  if (!tokenizer)
    return fail(tokenizer.status().message() + "; moe-serve needs text in and out");
  std::optional<rt::ChatTemplate> chat;
  serve::ModelInfo model;
  model.name = modelName(f);
  model.tokenizer = tokenizer->get();
  model.eosTokens = rt::eosTokens(p);
  if (const plan::TextSpec *text = p.text()) {
    if (text->chat_template())
      model.chatTemplateText = text->chat_template()->str();
    model.bosToken = text->bos_token() ? text->bos_token()->str() : "";
    model.eosToken = text->eos_token() ? text->eos_token()->str() : "";
  }
  if (!f.chatTemplate.empty()) {
    auto file = rt::readFile(f.chatTemplate, 1u << 20);
    if (!file)
      return fail("--chat-template: " + file.status().message());
    model.chatTemplateText = *file;
  }
  if (!model.chatTemplateText.empty()) {
    auto parsed = rt::ChatTemplate::parse(model.chatTemplateText);
    if (!parsed)
      return fail((f.chatTemplate.empty() ? std::string("the plan's chat template")
                                          : "--chat-template " + f.chatTemplate) +
                  ": " + parsed.status().message());
    chat = parsed.take();
    model.chatTemplate = &*chat;
  }

  const int64_t context = p.kv_cache()->max_context();
  const int64_t blockSize = f.engine.blockSize;
  rt::EngineOptions options =
      tools::engineOptions(f.engine, 8 * ((context + blockSize - 1) / blockSize));
  options.prefixCaching = f.prefixCaching;
  options.residentKvCache = loadOptions.prefault != rt::Prefault::Off;
  options.tokenizer = *tokenizer;
  options.ranks = &ranks;
  auto engine = rt::Engine::create(**plan, **device, options);
  if (!engine)
    return fail(engine.status().message());
  if (!leader) {
    if (rt::Status st = rt::followService(**engine, ranks, **device); !st)
      return fail(st.message());
    return 0;
  }
  model.vocabSize = (*engine)->session().vocabSize();
  model.maxContext = (*engine)->session().maxContext();
  model.maxPromptTokens = f.maxPromptTokens > 0 ? f.maxPromptTokens : model.maxContext;
  const rt::EngineLoad idle = (*engine)->load();

  if (!f.apiKeyFile.empty()) {
    auto keys = serve::ApiKeys::load(f.apiKeyFile);
    if (!keys)
      return fail(keys.status().message());
    f.serve.apiKeys = keys.take();
    if (serve::ApiKeys::worldReadable(f.apiKeyFile))
      note("warning: " + f.apiKeyFile + " can be read by every user of this machine; "
           "chmod o-r it");
  }
  if (!f.serve.apiKeys && f.serve.host != "127.0.0.1" && f.serve.host != "::1" &&
      f.serve.host != "localhost")
    note("warning: listening on " + f.serve.host + " without --api-key-file: anyone who "
         "reaches this address can use the model");
  serve::http::Limits &limits = f.serve.limits;
  limits.bodyBytes = size_t(f.maxBodyMiB * 1048576.0);
  limits.headerTime = millis(f.headerTimeout);
  limits.bodyTime = millis(f.bodyTimeout);
  limits.idleTime = millis(f.keepAlive);
  limits.openConnections = size_t(f.maxOpenConnections);
  raiseDescriptorLimit(f.maxOpenConnections);

  rt::EngineService service(engine.take(), {&ranks, device->get()});
  serve::Metrics metrics(f.pricePerHour);
  const rt::LoadedPlan &loaded = **plan;
  serve::Server server(
      service, model, metrics, f.serve, [&] { return readiness(loaded, verify); }, note);
  if (rt::Status st = server.bind(); !st)
    return fail(st.message());
  std::fprintf(stderr,
               "moe-serve: serving \"%s\" on http://%s:%d (%s, chat template: %s; KV pool "
               "%lld blocks of %lld tokens; context %lld; at most %lld requests at once)\n",
               model.name.c_str(), f.serve.host.c_str(), server.port(),
               dynamic_cast<const rt::ByteTokenizer *>(tokenizer->get()) ? "byte tokenizer"
                                                                         : "tokenizer.json",
               chat ? "yes" : "none", (long long)idle.totalBlocks,
               (long long)options.blockSize, (long long)model.maxContext,
               (long long)f.serve.maxConnections);
  // The check's outcome, in the log as soon as it is known.
  std::thread checker;
  if (verify)
    checker = std::thread([&loaded] {
      loaded.waitForPrefault();
      rt::PrefaultProgress pr = loaded.prefault();
      if (pr.weightsVerified())
        note("weights verified: " + std::to_string(pr.verified) + " bytes in " +
             std::to_string(pr.seconds) + " s; /health is ok");
      else if (pr.state == rt::PrefaultProgress::State::Failed)
        note("error: " + pr.error + "; the weights are not served (/health stays 503)");
    });
  if (!f.portFile.empty()) // last: whoever waits for it may connect at once
    std::ofstream(f.portFile) << server.port() << '\n';

  // With other ranks: a failed engine (a rank that stopped answering, a
  // step that failed) or SIGTERM (the launcher ending the job) ends the
  // in-flight requests with an error and this process, without waiting
  // for the engine's thread (it may wait in a collective for a dead rank).
  auto endJob = [&](const std::string &why) {
    const auto t0 = std::chrono::steady_clock::now();
    service.abort(why); // keeps an earlier failure as the reason
    const std::string reason = service.failure().value_or(why);
    note("rank 0: error: " + reason + "; answering the in-flight requests with an error");
    const bool answered = server.waitAnswered(std::chrono::milliseconds(500));
    char line[120];
    std::snprintf(line, sizeof line, "rank 0: %s in %.3f s; exiting",
                  answered ? "every request answered" : "some answers still unwritten",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    note(line);
    ranks.abandon();
    std::fflush(stderr);
    std::_Exit(1);
  };
  std::thread stopper([&] {
    int signal = 0;
    if (several) {
      const timespec tick{0, 100'000'000};
      while ((signal = sigtimedwait(&stopSignals, nullptr, &tick)) < 0)
        if (service.failure())
          endJob(*service.failure());
      endJob(std::string(signal == SIGTERM ? "SIGTERM" : "SIGINT") +
             ": the job was ended (another rank failed, or mpirun was stopped)");
    }
    sigwait(&stopSignals, &signal);
    std::fprintf(stderr, "moe-serve: %s: no new requests; %g s for the running ones\n",
                 signal == SIGTERM ? "SIGTERM" : "SIGINT", f.grace);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int64_t> cancelled = service.drain(millis(f.grace));
    std::string ids;
    for (int64_t id : cancelled)
      ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    std::fprintf(stderr, "moe-serve: drained in %.2f s: %zu request(s) cancelled%s%s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 cancelled.size(), ids.empty() ? "" : ": ids ", ids.c_str());
    // The cancelled streams still write their last events; closing the
    // server cuts whatever is left of them.
    if (!server.waitAnswered(std::chrono::seconds(5)))
      std::fprintf(stderr, "moe-serve: some answers were still being written after 5 s; "
                           "their connections are closed\n");
    server.stop();
  });
  server.run();
  stopper.join();
  if (checker.joinable())
    checker.join();
  if (auto failure = service.failure())
    return fail("the engine stopped: " + *failure);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Flags f;
  tools::Cli cli("moe-serve", "Serve a plan over HTTP with OpenAI's completions and chat "
                              "completions API, server-sent-event streaming and Prometheus "
                              "metrics.");
  CLI::App &app = cli.app;
  cli.addPlan(f.planDir);
  app.add_option("--host", f.serve.host,
                 "address to listen on (default 127.0.0.1: this machine only)")
      ->type_name("ADDR");
  app.add_option("--port", f.serve.port, "port to listen on (default 8000; 0: any free port)")
      ->check(tools::integerIn(0, 65535))
      ->type_name("N");
  app.add_option("--port-file", f.portFile, "write the port listened on to FILE")
      ->type_name("FILE");
  app.add_option("--model-name", f.modelName,
                 "the model's id in requests and /v1/models (default: the plan directory's "
                 "name)")
      ->type_name("NAME");
  app.add_option("--chat-template", f.chatTemplate,
                 "a Jinja chat template to use instead of the plan's")
      ->type_name("FILE");
  app.add_option("--api-key-file", f.apiKeyFile,
                 "require \"Authorization: Bearer KEY\" on every route but /health and "
                 "/metrics, with a KEY from FILE (one per line)")
      ->type_name("FILE");
  app.add_option("--max-connections", f.serve.maxConnections,
                 "generation requests answered at once; beyond them 503 (default 64)")
      ->check(tools::integerIn(1, 4096))
      ->type_name("N");
  app.add_option("--max-open-connections", f.maxOpenConnections,
                 "HTTP connections open at once; beyond them the longest-idle one is closed "
                 "(default 1024)")
      ->check(tools::integerIn(1, 1 << 20))
      ->type_name("N");
  auto seconds = [&](const char *flag, double &value, const std::string &help) {
    app.add_option(flag, value, help)->check(tools::positiveFinite())->type_name("SECONDS");
  };
  seconds("--request-timeout", f.serve.requestTimeout,
          "cancel a request that runs longer (default 600 s)");
  seconds("--header-timeout", f.headerTimeout,
          "a request's headers must arrive within this long of its first byte (default 10 s)");
  seconds("--body-timeout", f.bodyTimeout,
          "a request's body must arrive within this long of its headers (default 30 s)");
  seconds("--keep-alive", f.keepAlive,
          "an idle kept-alive connection is closed after this long (default 5 s)");
  app.add_option("--max-body", f.maxBodyMiB,
                 "largest request body, chunked or not; beyond it 413 (default 1 MiB)")
      ->check(tools::positiveFinite())
      ->type_name("MIB");
  app.add_option("--max-prompt-tokens", f.maxPromptTokens,
                 "longest prompt accepted (default: the plan's context)")
      ->check(tools::integerIn(1, int64_t(1) << 30))
      ->type_name("N");
  app.add_option("--grace", f.grace,
                 "on SIGTERM, seconds the running requests get to finish before they are "
                 "cancelled (default 30)")
      ->check(tools::finiteIn(0, 86400))
      ->type_name("SECONDS");
  app.add_option("--price-per-hour", f.pricePerHour,
                 "the machine's price per hour: /metrics then shows the cost per million "
                 "generated tokens")
      ->check(tools::positiveFinite())
      ->type_name("PRICE");
  app.add_flag("--no-verify-weights", f.noVerifyWeights,
               "serve without checking the weights' checksums as they are paged in (for "
               "weights checked at install time); by default /health is 503 until they match");
  tools::addEngineFlags(cli, f.engine, "8 sequences of the full context");
  app.add_flag("--prefix-caching", f.prefixCaching, "share KV blocks of common prompt prefixes");
  tools::addPrefault(cli, f.prefault);
  tools::addCollectiveTimeout(cli, f.collectiveTimeout);
  cli.addThreads(f.threads);
  cli.addDevice(f.device);
  if (auto code = cli.parse(argc, argv))
    return *code;
  return serveMain(f, cli);
}
