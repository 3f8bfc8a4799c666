//===- EvalMetricsTest.cpp - smp/base/EvalMetrics.h
//------------------------===//
//
// The metrics of a confusion matrix against scikit-learn 1.9's on the labels
// and predictions it counts (the values below are what f1_score,
// precision_score, recall_score with zero_division=0 and matthews_corrcoef
// returned): a class neither among the labels nor the predictions is left
// out of the averages, one only predicted is in them with its zeros.
//
//===----------------------------------------------------------------------===//

#include "smp/base/EvalMetrics.h"

#include <gtest/gtest.h>

#include <cmath>

using smp::base::evalMetric;

namespace {

// y = [0, 0, 0, 1, 1, 1, 0, 1], p = [0, 1, 3, 1, 1, 0, 0, 3] over 4
// classes: class 2 absent, class 3 only predicted.
const double kFour[16] = {2, 1, 0, 1, 1, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};

TEST(EvalMetrics, AveragesOverTheClassesPresentAsScikitLearn) {
  struct Want {
    const char *name;
    double value;
  } wants[] = {{"f1_macro", 0.38095238095238093},
               {"f1_micro", 0.5},
               {"f1_weighted", 0.5714285714285714},
               {"precision_macro", 0.4444444444444444},
               {"precision_micro", 0.5},
               {"precision_weighted", 0.6666666666666666},
               {"recall_macro", 0.3333333333333333},
               {"recall_micro", 0.5},
               {"recall_weighted", 0.5},
               {"matthews_correlation", 0.2182178902359924}};
  for (const Want &w : wants)
    EXPECT_NEAR(evalMetric(w.name, kFour, 4), w.value, 1e-15) << w.name;
}

TEST(EvalMetrics, BinaryIsClassOne) {
  // y = [0, 1, 1, 0, 1], p = [1, 1, 0, 0, 1].
  const double two[4] = {1, 1, 1, 2};
  for (const char *name : {"f1", "precision", "recall"})
    EXPECT_NEAR(evalMetric(name, two, 2), 2.0 / 3.0, 1e-15) << name;
  EXPECT_NEAR(evalMetric("matthews_correlation", two, 2), 1.0 / 6.0, 1e-15);
  // Class 1 never predicted nor a label: zero_division's 0, MCC's 0.
  const double none[4] = {5, 0, 0, 0};
  EXPECT_EQ(evalMetric("f1", none, 2), 0.0);
  EXPECT_EQ(evalMetric("precision", none, 2), 0.0);
  EXPECT_EQ(evalMetric("matthews_correlation", none, 2), 0.0);
  // A binary metric of more classes, or no label at all: NaN (smpc refuses
  // the first; smprun shows no metric for the second).
  EXPECT_TRUE(std::isnan(evalMetric("f1", kFour, 4)));
  const double empty[4] = {0, 0, 0, 0};
  EXPECT_TRUE(std::isnan(evalMetric("f1_macro", empty, 2)));
}

TEST(EvalMetrics, Names) {
  EXPECT_TRUE(smp::base::isEvalMetric("accuracy"));
  EXPECT_FALSE(smp::base::needsConfusion("accuracy"));
  EXPECT_TRUE(smp::base::needsConfusion("recall_weighted"));
  EXPECT_FALSE(smp::base::isEvalMetric("f1_marco"));
  EXPECT_TRUE(smp::base::isBinaryMetric("precision"));
  EXPECT_FALSE(smp::base::isBinaryMetric("precision_micro"));
  EXPECT_EQ(smp::base::evalMetricList().substr(0, 22),
            "accuracy, f1, f1_macro");
  // topK_accuracy: K from 2 to 1000, written without leading zeros.
  EXPECT_EQ(smp::base::topKAccuracy("top5_accuracy"), 5);
  EXPECT_EQ(smp::base::topKAccuracy("top1000_accuracy"), 1000);
  for (const char *bad :
       {"top1_accuracy", "top1001_accuracy", "top05_accuracy", "top_accuracy",
        "topx_accuracy", "top5accuracy", "top-5_accuracy", "accuracy"})
    EXPECT_EQ(smp::base::topKAccuracy(bad), 0) << bad;
  EXPECT_TRUE(smp::base::isEvalMetric("top5_accuracy"));
  EXPECT_FALSE(smp::base::needsConfusion("top5_accuracy"));
  EXPECT_TRUE(smp::base::isEvalCountOutput("eval_hits_top5"));
  EXPECT_TRUE(smp::base::isEvalCountOutput("eval_confusion"));
  EXPECT_FALSE(smp::base::isEvalCountOutput("eval_hits_top1"));
  EXPECT_FALSE(smp::base::isEvalCountOutput("loss"));
  // A regression's correlations, of the predictions.
  EXPECT_TRUE(smp::base::needsPredictions("spearmanr"));
  EXPECT_FALSE(smp::base::needsConfusion("pearson"));
  EXPECT_TRUE(smp::base::isEvalOutput("eval_predictions"));
  EXPECT_TRUE(smp::base::isEvalGatherOutput("eval_label_ids"));
  EXPECT_FALSE(smp::base::isEvalCountOutput("eval_predictions"));
}

// scipy.stats.pearsonr and spearmanr (scipy 1.17) of these values, ties
// ranked at their average.
TEST(EvalMetrics, CorrelationsAreScipys) {
  const double x[] = {1.5, 2.0, 2.0, 3.5, 0.25, 2.0, 4.0};
  const double y[] = {1.0, 3.0, 2.5, 3.0, 0.5, 1.0, 5.0};
  using smp::base::predictionMetric;
  EXPECT_NEAR(predictionMetric("pearson", x, y, 7), 0.8695886477919181, 1e-14);
  EXPECT_NEAR(predictionMetric("spearmanr", x, y, 7), 0.9058216273156767,
              1e-14);
  // Undefined (scipy: NaN with a warning): a constant side, one value, a
  // NaN.
  const double same[] = {2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0};
  EXPECT_TRUE(std::isnan(predictionMetric("pearson", same, y, 7)));
  EXPECT_TRUE(std::isnan(predictionMetric("spearmanr", x, same, 7)));
  EXPECT_TRUE(std::isnan(predictionMetric("pearson", x, y, 1)));
  const double nan[] = {1.0, NAN, 2.0};
  EXPECT_TRUE(std::isnan(predictionMetric("spearmanr", nan, y, 3)));
}

} // namespace
