//===- Evaluate.cpp - bits per byte, routing statistics -------------------===//
#include "moe/runtime/Evaluate.h"


#include <algorithm>
#include <cmath>
#include <sstream>

namespace moe::rt {

namespace {

/// log sum exp of a logits row, and its argmax (the first of equal maxima).
std::pair<double, int64_t> logSumExp(const float *row, int64_t vocab) {
  int64_t best = int64_t(std::max_element(row, row + vocab) - row);
  double top = row[best], sum = 0;
  for (int64_t v = 0; v < vocab; ++v)
    sum += std::exp(double(row[v]) - top);
  return {std::log(sum) + top, best};
}

} // namespace

Expected<TextScore> scoreTokens(Session &session, const std::vector<int32_t> &tokens,
                                int64_t context, Session *reference,
                                std::optional<int32_t> start, const Progress &progress) {
  int64_t maxContext = session.maxContext(), chunk = session.maxBatchTokens();
  const int64_t vocab = session.vocabSize();
  if (reference) {
    if (reference->vocabSize() != vocab)
      return Status::error("the reference model's vocabulary (" +
                           std::to_string(reference->vocabSize()) + ") differs from the model's (" +
                           std::to_string(vocab) + ")");
    maxContext = std::min(maxContext, reference->maxContext());
    chunk = std::min(chunk, reference->maxBatchTokens());
  }
  if (context < 2 || context > maxContext)
    return Status::error("evaluation window " + std::to_string(context) +
                         " must lie in [2, " + std::to_string(maxContext) + "]");
  if (tokens.size() < (start ? 1u : 2u))
    return Status::error("nothing to evaluate: " + std::to_string(tokens.size()) +
                         " tokens, and every prediction needs one before it");
  std::vector<int32_t> window, positions;
  std::vector<float> logits(size_t(chunk * vocab)), refLogits(reference ? logits.size() : 0);
  double nll = 0, refNll = 0, kl = 0;
  uint64_t agree = 0, predicted = 0;
  // Each window predicts all but its first token: with a start token the
  // windows follow each other; without, each begins at the last token the
  // previous one predicted.
  for (size_t at = 0; at + (start ? 0 : 1) < tokens.size();) {
    const size_t take = std::min(tokens.size() - at, size_t(start ? context - 1 : context));
    window.assign(start ? 1 : 0, start.value_or(0));
    window.insert(window.end(), tokens.begin() + long(at), tokens.begin() + long(at + take));
    at += start ? take : take - 1;
    if (progress)
      progress(std::min<uint64_t>(at, tokens.size()), tokens.size());
    const int64_t n = int64_t(window.size()) - 1;
    for (int64_t from = 0; from < n; from += chunk) {
      // Rows from..from+m-1 predict tokens from+1..from+m of the window.
      int64_t m = std::min<int64_t>(chunk, n - from);
      positions.resize(size_t(m));
      for (int64_t i = 0; i < m; ++i)
        positions[size_t(i)] = int32_t(from + i);
      if (Status st = session.forward(window.data() + from, positions.data(), m, logits.data());
          !st)
        return st;
      if (reference)
        if (Status st = reference->forward(window.data() + from, positions.data(), m,
                                           refLogits.data());
            !st)
          return st;
      for (int64_t i = 0; i < m; ++i) {
        const float *row = logits.data() + i * vocab;
        int32_t next = window[size_t(from + i + 1)];
        auto [lse, best] = logSumExp(row, vocab);
        nll += lse - double(row[next]);
        ++predicted;
        if (!reference)
          continue;
        const float *ref = refLogits.data() + i * vocab;
        auto [refLse, refBest] = logSumExp(ref, vocab);
        refNll += refLse - double(ref[next]);
        agree += best == refBest;
        for (int64_t v = 0; v < vocab; ++v) { // sum p_ref (log p_ref - log p)
          double logRef = double(ref[v]) - refLse;
          kl += std::exp(logRef) * (logRef - (double(row[v]) - lse));
        }
      }
    }
  }
  TextScore s;
  s.bytes = predicted;
  if (!std::isfinite(nll))
    return Status::error("the logits hold NaN or infinity: the plan's weights or activations "
                         "are not finite; no bits per byte can be given");
  s.bitsPerByte = nll / std::log(2.0) / double(predicted);
  s.perplexity = std::exp(nll / double(predicted));
  if (reference)
    s.comparison = Comparison{refNll / std::log(2.0) / double(predicted),
                              kl / double(predicted), double(agree) / double(predicted)};
  return s;
}

Expected<TextScore> scoreText(Session &session, const ByteTokenizer &tokenizer,
                              const std::string &text, int64_t context, Session *reference,
                              const Progress &progress) {
  if (text.empty())
    return Status::error("nothing to evaluate: the text is empty");
  return scoreTokens(session, tokenizer.encode(text), context, reference, tokenizer.startId(),
                     progress);
}

std::string expertLoadHistogram(const std::vector<ExpertLoad> &load) {
  static const char *bars[] = {" ", "\u2581", "\u2582", "\u2583", "\u2584",
                               "\u2585", "\u2586", "\u2587", "\u2588"};
  std::ostringstream os;
  for (const ExpertLoad &l : load) {
    uint64_t top = 0, total = 0;
    for (uint64_t c : l.counts) {
      top = std::max(top, c);
      total += c;
    }
    os << "layer " << l.layer << (l.layer < 10 ? "  " : " ") << "|";
    for (uint64_t c : l.counts)
      os << bars[top ? (c * 8 + top - 1) / top : 0];
    double mean = l.counts.empty() ? 0 : double(total) / double(l.counts.size());
    char ratio[48];
    std::snprintf(ratio, sizeof ratio, "| max/mean %.2f", mean > 0 ? double(top) / mean : 0.0);
    os << ratio << "\n";
  }
  return os.str();
}

} // namespace moe::rt
