// The OpenCV peer of bench_end_to_end: imread, warpAffine (the same rotation and scale about the
// centre that `gridwarp affine --rotate A --scale S` applies, linear), imwrite.
//   opencv_affine_peer INPUT OUTPUT ANGLE SCALE THREADS
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) {
    if (argc != 6) {
        std::cerr << "usage: opencv_affine_peer INPUT OUTPUT ANGLE SCALE THREADS\n";
        return 2;
    }
    cv::setNumThreads(std::atoi(argv[5]));
    const cv::Mat input = cv::imread(argv[1], cv::IMREAD_UNCHANGED);
    if (input.empty()) {
        std::cerr << "opencv_affine_peer: cannot read " << argv[1] << "\n";
        return 1;
    }
    const cv::Point2f centre((input.cols - 1) / 2.0f, (input.rows - 1) / 2.0f);
    const cv::Mat matrix = cv::getRotationMatrix2D(centre, std::atof(argv[3]), std::atof(argv[4]));
    cv::Mat output;
    cv::warpAffine(input, output, matrix, input.size(), cv::INTER_LINEAR, cv::BORDER_CONSTANT);
    return cv::imwrite(argv[2], output) ? 0 : 1;
}
